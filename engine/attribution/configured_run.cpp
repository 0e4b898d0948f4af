#include "attribution/configured_run.hpp"

#include <fmt/format.h>

#include <boost/json.hpp>

#include "attribution/dataset_attribution.hpp"
#include "attribution/gradient_model.hpp"
#include "common/error.hpp"
#include "extract/extraction.hpp"
#include "record/inputs_record.hpp"
#include "runtime/prompt.hpp"
#include "runtime/threads.hpp"

namespace ember::attribution {
namespace {

namespace json = boost::json;

// The manifest's run record of a configured run: what `ember verify` and a sweep's skip read.
json::object run_record(const runtime::LoadedModel& model, const config::RunConfig& config, const std::string& run_id) {
    return {{"run_id", run_id.empty() ? json::value(nullptr) : json::value(run_id)},
            {"config_hash", config::config_hash(config)},
            {"config", config::to_json(config)},
            {"inputs", record::inputs_json(record::collect_inputs(config, model.sha256, model.file.mapping()->state()))}};
}

std::size_t prompt_tokens_of(const json::object& record) {
    return record.at("metric").at("evaluations").at(0).at("prompt_tokens").to_number<std::size_t>();
}

}  // namespace

AttributeRequest request_from_config(const config::RunConfig& config, std::size_t threads) {
    const config::AttributeSection& a = *config.attribute;
    AttributeRequest r;
    r.add_bos = config.prompt.add_bos;
    r.special = config.prompt.special;
    r.ids = config.prompt.ids;  // [prompt] ids = [...]: the target tokenized after their text
    const auto kind = metric_from_name(a.metric);
    if (!kind) throw Error(fmt::format("attribute.metric '{}' is not one of logprob, logit-diff, prob", a.metric));
    r.metric = *kind;
    r.target = a.target;
    r.contrast = a.contrast;
    r.corrupt = a.corrupt;
    if (a.corrupt_select) r.corrupt_select = selection::parse(*a.corrupt_select);
    r.verify_top = a.verify_top;
    r.integrated_gradients = a.method == "ig";
    r.ig_steps = a.steps;
    r.output = config.output;
    r.threads = threads;
    r.request_record = {{"attribute", config::to_json(config).at("attribute")},
                        {"output", config::extraction_json(config.output)}};
    return r;
}

ConfiguredAttribution run_configured_attribution(const runtime::LoadedModel& model, const config::RunConfig& config,
                                                 const ConfiguredOptions& options) {
    const GradientModel gm(model.file, model.model->config());
    AttributeRequest base = request_from_config(config, runtime::effective_threads(config.model.threads));
    base.output.overwrite = base.output.overwrite || options.overwrite;
    base.run_record = run_record(model, config, options.run_id);
    if (config.dataset.path) return run_dataset_attribution(model, gm, config, std::move(base), options);
    if (!base.ids) base.prompt = runtime::read_prompt(config.prompt);
    check_pairing(base);
    const AttributeResult r = run_attribution(model, gm, base);
    return {r.dir, options.run_id, 1, 0, r.prompt_tokens, r.arrays, r.metric, r.forward_ms, r.backward_ms};
}

AttributionSummary summary_from_manifest(const json::object& manifest) {
    AttributionSummary s;
    if (const json::value* id = manifest.if_contains("run_id"); id && id->is_string()) s.run_id = std::string(id->as_string());
    if (const json::value* samples = manifest.if_contains("samples"); samples && samples->is_array()) {
        for (const json::value& record : samples->as_array()) s.prompt_tokens += prompt_tokens_of(record.as_object());
    } else {
        s.prompt_tokens = prompt_tokens_of(manifest);
    }
    return s;
}

}  // namespace ember::attribution
