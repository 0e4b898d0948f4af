#include "attribution/dataset_attribution.hpp"

#include <fmt/format.h>

#include <boost/json.hpp>

#include <cmath>
#include <fstream>
#include <iterator>
#include <optional>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/sha256_file.hpp"
#include "extract/dataset.hpp"
#include "extract/dataset_outputs.hpp"
#include "record/partial_file.hpp"
#include "record/run_directory.hpp"
#include "record/strict_json.hpp"
#include "record/strict_parse.hpp"

namespace ember::attribution {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

constexpr const char* kKind = "ember.attribution.dataset";
constexpr const char* kRecordsName = "samples.jsonl";

std::optional<std::string> string_member(const extract::Sample& s, const char* key, const fs::path& file) {
    const json::value* v = s.metadata.if_contains(key);
    if (!v || v->is_null()) return std::nullopt;
    if (!v->is_string())
        throw Error(fmt::format("{}:{}: sample {}: \"{}\" must be a string", file.string(), s.line, s.id_text(), key));
    return std::string(v->get_string());
}

struct Prepared {
    extract::Sample sample;
    AttributeRequest request;
    PreparedAttribution prepared;
};

// Every sample of the dataset tokenized, selected and aligned, before the directory is touched.
std::vector<Prepared> prepare_samples(const runtime::LoadedModel& model, const GradientModel& gm,
                                      const config::RunConfig& config, const AttributeRequest& base) {
    const fs::path& file = *config.dataset.path;
    const selection::Spec default_select = selection::parse(config.dataset.select);
    std::vector<Prepared> samples;
    extract::DatasetReader reader(file);
    for (extract::Sample s; reader.next(s);) {
        AttributeRequest r = base;
        r.prompt = s.text;  // a sample is text: no [prompt] ids reach it
        r.ids.reset();
        r.corrupt_ids.reset();
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
    return samples;
}

// Where an unfinished run stands (progress.json).
struct Progress {
    std::string run_id;
    std::size_t samples = 0;       // finished, in dataset order
    std::uint64_t records = 0;     // the bytes of samples.jsonl they wrote
    double forward_ms = 0.0, backward_ms = 0.0;
};

std::string read_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The progress record of an unfinished attribution dataset run in `dir`, if any.
std::optional<json::object> progress_record(const fs::path& dir) {
    std::error_code ec;
    if (fs::exists(dir / record::kManifestName, ec) || !fs::exists(dir / extract::kProgressName, ec)) return std::nullopt;
    try {
        json::value v = parse_strict_json(read_text(dir / extract::kProgressName), extract::kProgressName);
        const json::value* kind = v.is_object() ? v.as_object().if_contains("kind") : nullptr;
        if (!kind || !kind->is_string() || kind->as_string() != kKind) return std::nullopt;
        return std::move(v.as_object());
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

// An unfinished run of this kind is continued in place (RunDirectoryOptions::resumable).
bool resumable(const fs::path& dir) { return progress_record(dir).has_value(); }

std::optional<Progress> read_progress(const fs::path& dir, const std::string& run_key) {
    const std::optional<json::object> o = progress_record(dir);
    const json::value* key = o ? o->if_contains("run_key") : nullptr;
    if (!key || !key->is_string() || key->as_string() != run_key) return std::nullopt;
    try {
        Progress p;
        p.run_id = o->at("run_id").is_string() ? std::string(o->at("run_id").as_string()) : std::string();
        p.samples = o->at("samples").to_number<std::size_t>();
        p.records = o->at("records_bytes").to_number<std::uint64_t>();
        p.forward_ms = o->at("forward_ms").to_number<double>();
        p.backward_ms = o->at("backward_ms").to_number<double>();
        return p;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

void write_progress(const fs::path& dir, const std::string& run_key, const Progress& p) {
    const json::object o{{"kind", kKind},
                         {"run_key", run_key},
                         {"run_id", p.run_id.empty() ? json::value(nullptr) : json::value(p.run_id)},
                         {"samples", p.samples},
                         {"records_bytes", p.records},
                         {"forward_ms", p.forward_ms},
                         {"backward_ms", p.backward_ms}};
    write_file_atomically(dir / extract::kProgressName, strict_json(o) + "\n");
}

// A fresh start where an unfinished run of another config (or another dataset or model)
// stood: its sample files and its progress go.
void remove_unfinished_run(const fs::path& dir) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (e.is_regular_file(ec) && (name.starts_with("sample") || name == extract::kProgressName)) fs::remove(e.path(), ec);
    }
}

// The manifest's records of the samples: the lines of samples.jsonl read back (strict_parse
// reads a double as the bits strict_json wrote), so a resumed run's manifest is an
// uninterrupted run's.
json::array read_records(const fs::path& path) {
    const std::string text = read_text(path);
    json::array records;
    std::size_t line = 0;
    for (std::size_t at = 0; at < text.size();) {
        const std::size_t end = text.find('\n', at);
        if (end == std::string::npos) throw Error(fmt::format("{}: the last line has no newline", path.string()));
        records.push_back(parse_strict_json(std::string_view(text).substr(at, end - at), fmt::format("{}:{}", path.string(), ++line)));
        at = end + 1;
    }
    return records;
}

}  // namespace

void check_pairing(const AttributeRequest& r) {
    if ((r.verify_top > 0 || r.integrated_gradients || r.corrupt_select) && !r.has_corrupt())
        throw Error("attribute.verify_top, method = \"ig\" and corrupt_select go with a corrupted prompt "
                    "(attribute.corrupt, or a dataset line's \"corrupt\")");
}

ConfiguredAttribution run_dataset_attribution(const runtime::LoadedModel& model, const GradientModel& gm,
                                              const config::RunConfig& config, AttributeRequest base,
                                              const ConfiguredOptions& options) {
    const fs::path& file = *config.dataset.path;
    const extract::DatasetInfo info = extract::scan_dataset(file);
    const std::vector<Prepared> samples = prepare_samples(model, gm, config, base);
    const std::string run_key = sha256_hex(config::canonical_json(config) + info.sha256 + model.sha256);

    record::RunDirectoryWriter writer(base.output.dir, {base.output.overwrite, "ember run (attribute)", {}, resumable});
    const fs::path dir = writer.dir();
    const std::optional<Progress> resumed = read_progress(dir, run_key);
    if (!resumed) remove_unfinished_run(dir);
    Progress point = resumed.value_or(Progress{options.run_id, 0, 0, 0.0, 0.0});
    if (point.samples > samples.size()) throw Error(fmt::format("{}: records more samples than the dataset has; remove the directory "
                                                                "to start over", (dir / extract::kProgressName).string()));
    // The run id is the interrupted run's: one run, continued.
    base.run_record["run_id"] = point.run_id.empty() ? json::value(nullptr) : json::value(point.run_id);
    record::PartialFile records(dir / kRecordsName, resumed ? std::optional<std::uint64_t>(point.records) : std::nullopt);
    if (!resumed) write_progress(dir, run_key, point);  // a fresh run's first resume point

    ConfiguredAttribution out;
    out.resumed_samples = point.samples;
    for (std::size_t i = point.samples; i < samples.size(); ++i) {
        const Prepared& p = samples[i];
        const std::string prefix = fmt::format("sample{}.", p.sample.index);
        AttributeResult one;
        json::object record{{"index", p.sample.index}, {"id", p.sample.id}, {"line", p.sample.line}, {"prefix", prefix},
                            {"prompt", p.request.prompt}, {"select", p.request.select->to_string()}};
        for (auto& kv : write_attribution(writer, prefix, model, gm, p.request, p.prepared, one))
            record[kv.key()] = std::move(kv.value());
        records.write(strict_json(record) + "\n");
        records.flush();
        point.samples = i + 1;
        point.records = records.size();
        point.forward_ms += one.forward_ms;
        point.backward_ms += one.backward_ms;
        write_progress(dir, run_key, point);
        if (options.on_sample) options.on_sample(point.samples);
    }
    records.finish();
    std::error_code ec;
    fs::remove(dir / extract::kProgressName, ec);

    json::object manifest = manifest_head(model, base, kKind,
                                          "per sample I: the files of a single-prompt attribution run (docs/attribution.md), "
                                          "each name starting with sampleI.; samples.jsonl (one line per sample, its record "
                                          "in 'samples'); manifest.json last");
    json::array sample_records = read_records(dir / kRecordsName);
    if (sample_records.size() != samples.size())
        throw Error(fmt::format("{}: {} lines for {} samples", (dir / kRecordsName).string(), sample_records.size(), samples.size()));
    const json::value& first_metric = sample_records.front().at("metric").at("value");
    out.metric = first_metric.is_number() ? first_metric.to_number<double>() : std::nan("");
    manifest["dataset"] = {{"path", file.string()}, {"sha256", info.sha256}, {"bytes", info.bytes}, {"samples", samples.size()}};
    manifest["samples"] = std::move(sample_records);
    manifest["timing"] = {{"forward_ms", point.forward_ms}, {"backward_ms", point.backward_ms}};
    for (const json::value& r : manifest.at("samples").as_array())
        out.prompt_tokens += r.at("metric").at("evaluations").at(0).at("prompt_tokens").to_number<std::size_t>();
    writer.commit(std::move(manifest));

    out.dir = writer.output_dir();
    out.run_id = point.run_id;
    out.samples = samples.size();
    for (const auto& e : fs::directory_iterator(out.dir)) out.arrays += e.path().extension() == ".npy";
    out.forward_ms = point.forward_ms;
    out.backward_ms = point.backward_ms;
    return out;
}

}  // namespace ember::attribution
