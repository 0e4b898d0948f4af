#include "attribution/configured_run.hpp"

#include <fmt/format.h>

#include <boost/json.hpp>

#include "attribution/gradient_model.hpp"
#include "common/error.hpp"
#include "extract/dataset.hpp"
#include "extract/extraction.hpp"
#include "record/inputs_record.hpp"
#include "record/run_directory.hpp"
#include "runtime/prompt.hpp"
#include "runtime/threads.hpp"

namespace ember::attribution {
namespace {

namespace json = boost::json;

std::optional<std::string> string_member(const extract::Sample& s, const char* key, const std::filesystem::path& file) {
    const json::value* v = s.metadata.if_contains(key);
    if (!v || v->is_null()) return std::nullopt;
    if (!v->is_string())
        throw Error(fmt::format("{}:{}: sample {}: \"{}\" must be a string", file.string(), s.line, s.id_text(), key));
    return std::string(v->get_string());
}

// The manifest's run record of a configured run: what `ember verify` and a sweep's skip read.
json::object run_record(const runtime::LoadedModel& model, const config::RunConfig& config) {
    return {{"config_hash", config::config_hash(config)},
            {"config", config::to_json(config)},
            {"inputs", extract::inputs_json(extract::collect_inputs(config, model.sha256, model.file.mapping()->state()))}};
}

}  // namespace

AttributeRequest request_from_config(const config::RunConfig& config, std::size_t threads) {
    const config::AttributeSection& a = *config.attribute;
    AttributeRequest r;
    r.add_bos = config.prompt.add_bos;
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
                                                 bool overwrite) {
    const GradientModel gm(model.file, model.model->config());
    AttributeRequest base = request_from_config(config, extract::effective_threads(config.model.threads));
    base.output.overwrite = base.output.overwrite || overwrite;
    base.run_record = run_record(model, config);
    const auto check_pairing = [](const AttributeRequest& r) {
        if ((r.verify_top > 0 || r.integrated_gradients || r.corrupt_select) && !r.corrupt)
            throw Error("attribute.verify_top, method = \"ig\" and corrupt_select go with a corrupted prompt "
                        "(attribute.corrupt, or a dataset line's \"corrupt\")");
    };
    ConfiguredAttribution out;
    if (!config.dataset.path) {
        base.prompt = extract::read_prompt(config.prompt);
        check_pairing(base);
        const AttributeResult r = run_attribution(model, gm, base);
        return {r.dir, 1, r.prompt_tokens, r.arrays, r.metric, r.forward_ms, r.backward_ms};
    }

    // Every sample prepared (tokenized, selected, aligned) before the directory is touched.
    const std::filesystem::path& file = *config.dataset.path;
    const extract::DatasetInfo info = extract::scan_dataset(file);
    const selection::Spec default_select = selection::parse(config.dataset.select);
    struct Prepared {
        extract::Sample sample;
        AttributeRequest request;
        PreparedAttribution prepared;
    };
    std::vector<Prepared> samples;
    extract::DatasetReader reader(file);
    for (extract::Sample s; reader.next(s);) {
        AttributeRequest r = base;
        r.prompt = s.text;
        if (s.target) r.target = *s.target;
        if (auto v = string_member(s, "corrupt", file)) r.corrupt = *v;
        r.select = s.select ? *s.select : default_select;
        if (auto v = string_member(s, "corrupt_select", file)) r.corrupt_select = selection::parse(*v);
        else if (r.corrupt && !r.corrupt_select) r.corrupt_select = r.select;  // the same spec on both sides
        try {
            if (r.target.empty()) throw Error("no target: give the line a \"target\" or [attribute] a target");
            check_pairing(r);
            PreparedAttribution p = prepare_attribution(model, gm, r);
            samples.push_back({s, std::move(r), std::move(p)});
        } catch (const selection::SpecError& e) {
            throw Error(fmt::format("{}:{}: sample {}: {}", file.string(), s.line, s.id_text(), e.what()));
        } catch (const Error& e) {
            throw Error(fmt::format("{}:{}: sample {}: {}", file.string(), s.line, s.id_text(), e.what()));
        }
    }
    if (samples.empty()) throw Error(fmt::format("{}: the dataset has no sample", file.string()));

    extract::RunDirectoryWriter writer(base.output.dir, {base.output.overwrite, "ember run (attribute)", {}, {}});
    json::object manifest = manifest_head(model, base, "ember.attribution.dataset",
                                          "per sample I: the files of a single-prompt attribution run (docs/attribution.md), "
                                          "each name starting with sampleI.; manifest.json last");
    json::array records;
    AttributeResult total;
    for (std::size_t i = 0; i < samples.size(); ++i) {
        const Prepared& p = samples[i];
        const std::string prefix = fmt::format("sample{}.", p.sample.index);
        AttributeResult one;
        json::object record{{"index", p.sample.index}, {"id", p.sample.id}, {"line", p.sample.line}, {"prefix", prefix},
                            {"prompt", p.request.prompt}, {"select", p.request.select->to_string()}};
        for (auto& kv : write_attribution(writer, prefix, model, gm, p.request, p.prepared, one))
            record[kv.key()] = std::move(kv.value());
        records.push_back(std::move(record));
        if (i == 0) {
            out.metric = one.metric;
            out.prompt_tokens = one.prompt_tokens;
        }
        total.forward_ms += one.forward_ms;
        total.backward_ms += one.backward_ms;
    }
    manifest["dataset"] = {{"path", file.string()}, {"sha256", info.sha256}, {"bytes", info.bytes}, {"samples", samples.size()}};
    manifest["samples"] = std::move(records);
    manifest["timing"] = {{"forward_ms", total.forward_ms}, {"backward_ms", total.backward_ms}};
    writer.commit(std::move(manifest));
    out.dir = writer.output_dir();
    out.samples = samples.size();
    for (const extract::FileRecord& f : writer.files()) out.arrays += f.name.ends_with(".npy");
    out.forward_ms = total.forward_ms;
    out.backward_ms = total.backward_ms;
    return out;
}

}  // namespace ember::attribution
