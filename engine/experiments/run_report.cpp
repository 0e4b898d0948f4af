#include "experiments/run_report.hpp"

#include <fmt/format.h>

#include <boost/json/parse.hpp>

#include "config/run_config.hpp"

namespace ember::experiments {
namespace {

namespace json = boost::json;

double to_ms(std::uint64_t ns) { return static_cast<double>(ns) / 1e6; }

json::object describe(const ExperimentRecord& r) {
    const PluginLibrary& lib = *r.library;
    json::array stages;
    for (StageId s : lib.implemented_stages()) stages.emplace_back(stage_id_name(s));

    json::object timings;
    for (std::size_t i = 0; i < kStageCount; ++i) {
        const StageTiming& t = r.timings[i];
        if (t.calls == 0) continue;
        timings[stage_id_name(static_cast<StageId>(i))] =
            json::object{{"calls", t.calls}, {"total_ms", to_ms(t.total_ns)}, {"max_ms", to_ms(t.max_ns)}};
    }

    boost::system::error_code ec;
    json::value config = json::parse(r.spec.config_json, ec);
    if (ec) config = r.spec.config_json;

    return json::object{
        {"name", lib.name()},
        {"version", lib.version()},
        {"description", lib.description()},
        {"plugin", lib.path().string()},
        {"abi", fmt::format("{}.{}", lib.abi_major(), lib.abi_minor())},
        {"origin", r.spec.origin},
        {"config", std::move(config)},
        {"stages", std::move(stages)},
        {"outcome", outcome_name(r.outcome)},
        {"failure", r.failure.empty() ? json::value(nullptr) : json::value(r.failure)},
        {"timings", std::move(timings)},
    };
}

}  // namespace

json::object experiments_report(const RunnerSnapshot& snapshot) {
    json::array experiments;
    for (const auto& record : snapshot.records) experiments.push_back(describe(record));
    json::array failures;
    for (const auto& f : snapshot.failures) failures.emplace_back(f);
    return json::object{
        {"failure_policy", config::failure_policy_name(snapshot.failure)},
        {"timeout_ms", snapshot.timeout_ms},
        {"experiments", std::move(experiments)},
        {"failures", std::move(failures)},
    };
}

json::object experiments_report(const ExperimentRunner& runner) { return experiments_report(runner.snapshot()); }

}  // namespace ember::experiments
