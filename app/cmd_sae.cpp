// ember sae top --run DIR --feature F [--k N] [--sae I|NAME] [--json]
// The rows of an extraction (`ember extract --sae`, dense or sparse) where SAE feature F
// fires most: value, sample, position, token text and byte span, largest first
// (extract/sae_top.hpp; docs/features.md).
#include <fmt/format.h>

#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "common/printable.hpp"
#include "extract/sae_top.hpp"

namespace ember::app {
namespace {

int run_sae_top(const std::vector<std::string>& args) {
    po::options_description options("sae top options");
    options.add_options()
        ("run", po::value<std::string>(), "an extraction's run directory (ember extract --sae)")
        ("feature", po::value<long long>(), "the feature's index")
        ("k", po::value<long long>()->default_value(10), "how many rows")
        ("sae", po::value<std::string>(), "which SAE of the run (its index or name), when it has several")
        ("json", po::bool_switch(), "print JSON");
    po::positional_options_description positional;
    po::variables_map vm;
    if (!parse_options("sae top", args, options, positional, vm)) return kExitOk;
    if (!vm.count("run") || !vm.count("feature")) throw UsageError("usage: ember sae top --run DIR --feature F [--k N]");
    const long long feature = vm["feature"].as<long long>(), k = vm["k"].as<long long>();
    if (feature < 0) throw UsageError("--feature must be >= 0");
    if (k < 1 || k > (1 << 24)) throw UsageError("--k must be in [1, 16777216]");
    extract::TopRequest request{static_cast<std::size_t>(feature), static_cast<std::size_t>(k), std::nullopt};
    if (vm.count("sae")) request.sae = vm["sae"].as<std::string>();
    const std::string dir = vm["run"].as<std::string>();
    const extract::TopRows top = extract::top_feature_rows(dir, request);

    if (vm["json"].as<bool>()) {
        boost::json::array rows;
        for (const extract::TopRow& r : top.top)
            rows.push_back({{"row", r.row},               {"value", r.value},         {"sample", r.sample},
                            {"id", r.sample_id},          {"position", r.position},   {"token", r.token},
                            {"piece", r.piece},           {"byte_start", r.byte_start}, {"byte_end", r.byte_end}});
        print_json(boost::json::object{{"dir", dir},
                                       {"sae", top.sae_name},
                                       {"sae_index", top.sae_index},
                                       {"feature", feature},
                                       {"rows", top.rows},
                                       {"firing", top.firing},
                                       {"top", std::move(rows)}});
        return kExitOk;
    }
    fmt::print("SAE {} ({}), feature {}: fires on {} of {} rows\n", printable(top.sae_name), top.sae_index, feature,
               top.firing, top.rows);
    fmt::print("{:>4}  {:>12}  {:>7}  {:>8}  {:>11}  {}\n", "rank", "value", "sample", "position", "bytes", "token");
    for (std::size_t i = 0; i < top.top.size(); ++i) {
        const extract::TopRow& r = top.top[i];
        fmt::print("{:>4}  {:>12.6g}  {:>7}  {:>8}  {:>11}  {}\n", i + 1, r.value, r.sample, r.position,
                   fmt::format("{}-{}", r.byte_start, r.byte_end), printable(fmt::format("'{}'", r.piece)));
    }
    return kExitOk;
}

}  // namespace

int run_sae(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        fmt::print("usage: ember sae top --run DIR --feature F [--k N] [--sae I|NAME] [--json]\n"
                   "  top: the rows of an extraction (ember extract --sae) where a feature fires most\n");
        if (args.empty()) throw UsageError("ember sae: give a subcommand (top)");
        return kExitOk;
    }
    if (args[0] == "top") return run_sae_top({args.begin() + 1, args.end()});
    throw UsageError(fmt::format("ember sae: unknown subcommand '{}' (top)", args[0]));
}

}  // namespace ember::app
