// patch: replaces activations with ones a `capture` experiment saved in an earlier run
// (activation patching). Route-locked: the source must come from the same model file
// (sha256), the same route and, when rows are matched by position, a prompt of the same
// length, or patch refuses it by name.
// The source is checked by content: its manifest's seal must match, and every array patch
// reads must have the size and SHA-256 its files table says.
//
//   [[experiment]]
//   plugin = "build/plugins/libpatch.so"
//   [experiment.config]
//   source = "runs/clean/capture"  # a capture directory (or its manifest.json), relative to this TOML file
//   stages = ["after_layer"]       # default: every stage the source holds
//   layers = [3]                   # or "all" (default)
//   positions = [4]                # or "last", or "all" (default)
//   phase = "prefill"              # or "decode", or "all" (default)
//   record = "patch.json"          # the record, in the run's output directory (default "patch.json")
//
// Instead of positions, rows can be matched by text (selection specs, ember/selection.hpp),
// across prompts of different lengths:
//   source_select = "substring:كتب"  # the rows of the source's prompt to take
//   target_select = "substring:درس"  # the rows of this run's prompt to write them to
//   select = "substring:كتب:last"    # or one spec for both sides
// The k-th row the source spec selects (in position order) goes to the k-th row the target
// spec selects. The source spec is resolved once against the prompt text and token spans
// the source's manifest records; the target spec at every before_prefill against this
// run's prompt (each sample's in a dataset run). Different row counts are refused, naming
// both specs and both counts; a spec that selects nothing is an error naming it. Only
// prompt rows are matched this way (phase "prefill" or "all"; decode rows are left alone).
//
// head_outputs and mlp_activation patch like the block stages (rows by position);
// attention_pattern is read-only: refused when named, skipped in a source otherwise.
//
// At a selected site, every selected row whose position the source captured is
// overwritten with the captured row. Layers and positions asked for by name (a list, or
// "last") must be in the source: patch refuses a source that lacks one, naming it, before
// the run starts, and fails the run if a selected row's position turns out to be missing.
// With positions = "all", rows the source did not capture are left alone.
//
// The record (kind "ember.patch", strict JSON, sealed into the run's manifest with every
// other file) says which source was used, by its path, its run id, its run's name (the
// directory holding the capturing run's run.json, as a sweep names it) and manifest seal, and how many
// rows were written per stage, layer and phase; with specs, "selection" names both specs
// and the rows they matched (position, byte span, partial): "source_rows", and
// "target_rows" one list per prefill (one per sample in a dataset run). It is written when
// the generation completes or fails ("complete": false, the error).
#include <ember/experiment.hpp>
#include <ember/manifest_seal.hpp>
#include <ember/npy.hpp>
#include <ember/sha256.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "plugin_support/json_text.hpp"
#include "plugin_support/site_selection.hpp"
#include "plugin_support/stage_experiment.hpp"

namespace {

namespace fs = std::filesystem;
using ember_plugins::Selection;
using ember_plugins::Stage;

// One captured array: rows by token position.
struct SourceArray {
    std::string file;
    std::size_t cols = 0;
    ember::ExecutionPhase phase = ember::ExecutionPhase::Prefill;
    std::map<std::size_t, std::size_t> row_of_position;
    std::vector<float> values;
};

using SiteKey = std::tuple<int, long, int>;  // stage, layer (-1 for logits stages), phase

SiteKey site_key(Stage stage, std::optional<std::size_t> layer, ember::ExecutionPhase phase) {
    return {static_cast<int>(stage), layer ? static_cast<long>(*layer) : -1L, static_cast<int>(phase)};
}

const ember::JsonValue& member(const ember::JsonValue& object, std::string_view key, const std::string& where) {
    const ember::JsonValue* v = object.is_object() ? object.find(key) : nullptr;
    if (!v) throw std::runtime_error(where + ": manifest has no '" + std::string(key) + "'");
    return *v;
}

std::string read_bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string list_text(const std::set<std::size_t>& values) {
    std::string out;
    for (auto v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
    return out.empty() ? "none" : out;
}

// The spec keys of a patch config: the target's spec is read by the Selection under
// target_select, or select (both sides); ConfigError on a combination that makes no sense.
const char* target_spec_key(const ember::ExperimentConfig& config) {
    const bool both = config.has("select"), source = config.has("source_select"), target = config.has("target_select");
    if (both && (source || target))
        throw ember::ConfigError("give select (both sides) or source_select and target_select, not both");
    if (source != target)
        throw ember::ConfigError(std::string("config key '") + (source ? "source_select" : "target_select") +
                                 "' needs '" + (source ? "target_select" : "source_select") +
                                 "' (or give select for both sides)");
    return target ? "target_select" : "select";
}

// Matched rows as JSON: position, byte span, partial.
std::string rows_json(const std::vector<ember::selection::Selected>& rows,
                      const std::vector<ember::selection::TokenSpan>& spans) {
    std::string out = "[";
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const auto& span = spans.at(rows[i].position);
        out += std::string(i ? ", " : "") + "{\"position\": " + std::to_string(rows[i].position) +
               ", \"byte_start\": " + std::to_string(span.start) + ", \"byte_end\": " + std::to_string(span.end) +
               ", \"partial\": " + (rows[i].partial ? "true" : "false") + "}";
    }
    return out + "]";
}

class Patch : public ember_plugins::StageExperiment {
public:
    explicit Patch(const ember::ExperimentConfig& config)
        : StageExperiment(Selection(config, ember_plugins::writable_stages(), target_spec_key(config))) {
        config.expect_only({"source", "stage", "stages", "layers", "positions", "phase", "record", "select",
                            "source_select", "target_select"});
        selection_.refuse_read_only("patch");
        if (!config.has("source")) throw ember::ConfigError("config key 'source' (a capture directory) is required");
        read_requested(config);
        if (selection_.spec()) {
            source_key_ = config.has("source_select") ? "source_select" : "select";
            source_spec_ = ember_plugins::read_spec(config, source_key_);
        }
        const ember::RunInfo info = ember::host().run_info();
        const std::string record = config.get_string("record", "patch.json");
        if (record.empty() || record.find('/') != std::string::npos || record == "manifest.json" || record == "run.json")
            throw ember::ConfigError("config key 'record' = '" + record + "' must be a plain file name (not manifest.json or run.json)");
        if (!info.output_dir.empty()) record_path_ = fs::path(std::string(info.output_dir)) / record;
        prompt_tokens_ = info.prompt_token_ids.size();

        fs::path source(ember::host().resolve_path(config.get_string("source", "")));
        const fs::path manifest_path = fs::is_directory(source) ? source / "manifest.json" : source;
        dir_ = manifest_path.parent_path();
        name_ = "patch source '" + dir_.string() + "'";

        std::ifstream in(manifest_path, std::ios::binary);
        if (!in) throw std::runtime_error(name_ + ": cannot open " + manifest_path.string());
        const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const ember::JsonValue manifest = ember::JsonValue::parse(text);
        if (member(manifest, "kind", name_).as_string() != "ember.capture")
            throw std::runtime_error(name_ + " is not a capture manifest");
        if (!member(manifest, "complete", name_).as_bool())
            throw std::runtime_error(name_ + " is incomplete (the run that captured it failed)");
        check_seal(text, manifest);
        find_source_run();
        check_route_lock(member(manifest, "run", name_));
        load_arrays(member(manifest, "arrays", name_), member(manifest, "files", name_));
        check_requested();
        if (source_spec_) select_source_rows(member(manifest, "run", name_));
    }

    // With specs: the target's rows in this prompt, matched one to one with the source's.
    ember::Status before_prefill(const ember::ExecutionContext& ctx) override {
        if (auto s = StageExperiment::before_prefill(ctx); !s.ok()) return s;
        if (!source_spec_) return {};
        const auto& target = selection_.selected();
        if (target.size() != source_rows_.size())
            return ember::Status::error(
                std::string("config key '") + source_key_ + "' = '" + source_spec_->to_string() + "' selects " +
                std::to_string(source_rows_.size()) + " row(s) of the source's prompt, but '" + selection_.select_key() +
                "' = '" + selection_.spec()->to_string() + "' selects " + std::to_string(target.size()) +
                " row(s) of this prompt: patch needs the same number on both sides");
        source_position_of_.assign(selection_.prompt_spans().size(), 0);
        for (std::size_t k = 0; k < target.size(); ++k) source_position_of_[target[k].position] = source_rows_[k].position;
        target_rows_.push_back(rows_json(target, selection_.prompt_spans()));
        return {};
    }

    const char* name() const override { return "patch"; }
    // Only the stages the source holds.
    std::uint64_t subscribed_stages() const override { return stage_bits_; }

    ember::Status on_model_loaded(const ember::ModelContext& model) override { return selection_.check_layers(model); }
    ember::Status on_generation_complete(const ember::GenerationContext&) override { return write_record(true, ""); }
    ember::Status on_error(const ember::GenerationContext&, std::string_view message) override {
        return write_record(false, message);
    }

private:
    // The layers and positions the config names (a list, or "last"): they must be in the source.
    void read_requested(const ember::ExperimentConfig& config) {
        if (const ember::JsonValue* v = config.json().find("layers"); v && v->is_array())
            for (auto l : config.get_int_list("layers", {})) requested_layers_.insert(static_cast<std::size_t>(l));
        if (const ember::JsonValue* v = config.json().find("positions")) {
            if (v->is_array()) {
                for (auto p : config.get_int_list("positions", {})) requested_positions_.insert(static_cast<std::size_t>(p));
                positions_named_ = true;
            } else if (v->is_string() && v->as_string() == "last") {
                positions_named_ = true;
            }
        }
    }

    // The manifest is the one capture sealed, and so describes these very files.
    void check_seal(const std::string& text, const ember::JsonValue& manifest) {
        const std::string seal = member(manifest, "manifest_sha256", name_).as_string();
        if (seal.size() != 64 || ember::seal::content_digest(text, seal) != seal)
            throw std::runtime_error(name_ + ": its manifest's seal does not match its bytes (changed after capture wrote it)");
        seal_ = seal;
        const ember::JsonValue* id = manifest.find("run_id");
        source_run_id_ = id && id->is_string() ? id->as_string() : member(member(manifest, "run", name_), "run_id", name_).as_string();
    }

    // The run the capture belongs to, by name: the nearest directory above it whose run.json
    // has the capture's run id (a capture writes inside its run's directory; a sweep names
    // that directory after the run). None found: the record's run_name is null.
    void find_source_run() {
        fs::path at = fs::absolute(dir_).lexically_normal();
        for (int up = 0; up < 4 && !at.empty(); ++up, at = at.parent_path()) {
            std::ifstream in(at / "run.json", std::ios::binary);
            if (!in) {
                if (at == at.root_path()) return;
                continue;
            }
            const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            try {
                const ember::JsonValue report = ember::JsonValue::parse(text);
                const ember::JsonValue* id = report.find("run_id");
                if (id && id->is_string() && id->as_string() == source_run_id_) {
                    source_run_dir_ = at;
                    return;
                }
            } catch (const std::exception&) {
            }
            return;  // another run's directory: the capture is not this run's
        }
    }

    // The source must describe this very computation: same model bytes, prompt length, route.
    void check_route_lock(const ember::JsonValue& run) const {
        const ember::RunInfo here = ember::host().run_info();
        const std::string sha = member(run, "model_sha256", name_).as_string();
        if (sha != here.model_sha256)
            throw std::runtime_error(name_ + " was captured from another model (sha256 " + sha + "), this run's is " +
                                     std::string(here.model_sha256));
        const std::size_t tokens = member(run, "prompt_token_ids", name_).items().size();
        if (!selection_.spec() && tokens != here.prompt_token_ids.size())
            throw std::runtime_error(name_ + " has a " + std::to_string(tokens) + "-token prompt, this run's has " +
                                     std::to_string(here.prompt_token_ids.size()));
        const std::string route = member(run, "route", name_).as_string();
        if (route != here.route)
            throw std::runtime_error(name_ + " was captured on route '" + route + "', this run uses '" +
                                     std::string(here.route) + "'");
    }

    // With specs: the rows source_spec_ selects in the prompt the source recorded, each of
    // which every prefill array patch reads must hold.
    void select_source_rows(const ember::JsonValue& run) {
        const ember::JsonValue* text = run.find("prompt_text");
        const ember::JsonValue* spans = run.find("prompt_token_spans");
        if (!text || !spans || !spans->is_array() || spans->items().empty())
            throw std::runtime_error(name_ + " records no prompt text and token spans (captured by an older capture, "
                                     "or in a dataset run): config key '" + source_key_ + "' needs them");
        if (run.find("prompt_text_hex"))
            throw std::runtime_error(name_ + ": its prompt is not valid UTF-8, so '" + source_key_ +
                                     "' cannot anchor to its text");
        for (const ember::JsonValue& span : spans->items()) {
            if (!span.is_array() || span.items().size() != 2 || !span.items()[0].is_integer() ||
                !span.items()[1].is_integer() || span.items()[0].as_integer() < 0 ||
                span.items()[1].as_integer() < span.items()[0].as_integer())
                throw std::runtime_error(name_ + ": a prompt_token_spans entry is not [start, end]");
            source_spans_.push_back({static_cast<std::size_t>(span.items()[0].as_integer()),
                                     static_cast<std::size_t>(span.items()[1].as_integer())});
        }
        std::string error;
        source_rows_ = ember_plugins::resolve_spec(*source_spec_, source_key_, text->as_string(), source_spans_,
                                                   "the source's prompt (" + name_ + ")", error);
        if (!error.empty()) throw std::runtime_error(error);
        for (const auto& [key, source] : sources_) {
            if (source.phase != ember::ExecutionPhase::Prefill) continue;
            std::set<std::size_t> held;
            for (const auto& [position, row] : source.row_of_position) held.insert(position);
            for (const auto& row : source_rows_)
                if (!held.count(row.position))
                    throw std::runtime_error(name_ + ": " + source.file + " holds no row for prompt position " +
                                             std::to_string(row.position) + ", which '" + source_key_ + "' = '" +
                                             source_spec_->to_string() + "' selects (it holds positions " +
                                             list_text(held) + ")");
        }
    }

    void load_arrays(const ember::JsonValue& arrays, const ember::JsonValue& files) {
        for (const ember::JsonValue& a : arrays.items()) {
            const auto stage = ember_plugins::stage_from_name(member(a, "stage", name_).as_string());
            if (!stage) throw std::runtime_error(name_ + ": unknown stage in manifest");
            const ember::JsonValue& layer_value = member(a, "layer", name_);
            const std::optional<std::size_t> layer =
                layer_value.is_integer() ? std::optional<std::size_t>(layer_value.as_integer()) : std::nullopt;
            const auto phase = member(a, "phase", name_).as_string() == "prefill" ? ember::ExecutionPhase::Prefill
                                                                                  : ember::ExecutionPhase::Decode;
            // The layers the source holds at the selected stages and phase, asked for or not.
            if (layer && selection_.wants_site(*stage, phase, std::nullopt)) layers_held_.insert(*layer);
            if (!selection_.wants_site(*stage, phase, layer)) continue;
            stage_bits_ |= std::uint64_t{1} << *stage;

            const std::string file_name = member(a, "file", name_).as_string();
            const fs::path file = dir_ / file_name;
            const std::string bytes = read_bytes(file);
            const ember::JsonValue& listed = member(files, file_name, name_ + " files");
            if (ember::sha256_hex(bytes) != member(listed, "sha256", name_).as_string())
                throw std::runtime_error(name_ + ": " + file_name + " does not match the SHA-256 its manifest records");
            ember::npy::Array npy = ember::npy::read(file);
            const auto& positions = member(a, "positions", name_).items();
            if (npy.shape.size() != 2 || npy.shape[0] != positions.size())
                throw std::runtime_error(name_ + ": " + file_name + " does not match its manifest entry");
            SourceArray source;
            source.file = file_name;
            source.cols = npy.shape[1];
            source.phase = phase;
            for (std::size_t row = 0; row < positions.size(); ++row)
                source.row_of_position[static_cast<std::size_t>(positions[row].as_integer())] = row;
            source.values = std::move(npy.values);
            sources_[site_key(*stage, layer, phase)] = std::move(source);
        }
    }

    // Refuses, by name, a layer or a position asked for that the source does not hold.
    void check_requested() const {
        for (std::size_t layer : requested_layers_)
            if (!layers_held_.count(layer))
                throw std::runtime_error(name_ + " holds no array for layer " + std::to_string(layer) +
                                         " at the selected stages and phase (it holds layers " + list_text(layers_held_) + ")");
        for (const auto& [key, source] : sources_) {
            if (source.phase != ember::ExecutionPhase::Prefill) continue;
            std::set<std::size_t> held;
            for (const auto& [position, row] : source.row_of_position) held.insert(position);
            std::set<std::size_t> wanted;
            for (std::size_t p : requested_positions_)
                if (p < prompt_tokens_) wanted.insert(p);
            if (positions_named_ && requested_positions_.empty() && prompt_tokens_ > 0) wanted.insert(prompt_tokens_ - 1);
            for (std::size_t p : wanted)
                if (!held.count(p))
                    throw std::runtime_error(name_ + ": " + source.file + " holds no row for prompt position " +
                                             std::to_string(p) + " (it holds positions " + list_text(held) + ")");
        }
        if (sources_.empty())
            throw std::runtime_error(name_ + " holds no arrays for the selected stages, layers and phase");
    }

    ember::Status act(Stage stage, const ember::ExecutionContext& ctx, std::optional<std::size_t> layer,
                        ember::TensorAccess& tensor) override {
        if (!selection_.wants(stage, ctx, layer)) return {};
        const auto it = sources_.find(site_key(stage, layer, ctx.phase));
        if (it == sources_.end()) return {};
        const SourceArray& source = it->second;
        if (source.cols != tensor.shape()[1])
            return ember::Status::error(name_ + " has " + std::to_string(source.cols) + " columns here, the activation " +
                                        std::to_string(tensor.shape()[1]));
        std::optional<std::size_t> missing;
        std::size_t& written = rows_written_[it->first];
        selection_.for_each_row(stage, ctx, tensor, [&](std::size_t row, std::size_t position) {
            // By spec: the source row matched with this one; by position: the same position.
            const std::size_t from_position = source_spec_ ? source_position_of_[position] : position;
            const auto found = source.row_of_position.find(from_position);
            if (found == source.row_of_position.end()) {
                if ((positions_named_ || source_spec_) && !missing) missing = from_position;
                return;
            }
            const float* from = source.values.data() + found->second * source.cols;
            auto to = tensor.row_mut(row);
            std::copy(from, from + source.cols, to.begin());
            ++written;
        });
        if (missing)
            return ember::Status::error(name_ + ": " + source.file + " holds no row for position " +
                                        std::to_string(*missing) + ", which the config asks to patch");
        return {};
    }

    ember::Status write_record(bool complete, std::string_view error) const {
        if (record_path_.empty()) return {};
        using ember_plugins::json_string;
        std::string rows;
        for (const auto& [key, count] : rows_written_) {
            const auto& [stage, layer, phase] = key;
            rows += std::string(rows.empty() ? "\n    " : ",\n    ") +
                    "{\"stage\": " + json_string(ember_plugins::stage_name(static_cast<Stage>(stage))) +
                    ", \"layer\": " + (layer < 0 ? std::string("null") : std::to_string(layer)) + ", \"phase\": " +
                    json_string(ember::phase_name(static_cast<ember::ExecutionPhase>(phase))) +
                    ", \"rows\": " + std::to_string(count) + "}";
        }
        const std::string text =
            "{\n  \"schema_version\": 1,\n  \"kind\": \"ember.patch\",\n  \"complete\": " +
            std::string(complete ? "true" : "false") + (complete ? "" : ",\n  " + ember_plugins::json_member("error", error)) +
            ",\n  \"source\": {" + ember_plugins::json_member("dir", dir_.string()) +
            ", \"run_id\": " + json_string(source_run_id_) + ", \"run_name\": " +
            (source_run_dir_.empty() ? std::string("null") : json_string(source_run_dir_.filename().string())) +
            ", \"run_dir\": " + (source_run_dir_.empty() ? std::string("null") : json_string(source_run_dir_.string())) +
            ", \"manifest_sha256\": " + json_string(seal_) +
            "},\n  \"rows_written\": [" + rows + (rows.empty() ? "" : "\n  ") + "]" + selection_record() + "\n}\n";
        try {
            ember::npy::write_file_atomically(record_path_, text, nullptr, 0);
        } catch (const std::exception& e) {
            return ember::Status::error(std::string("cannot write the patch record: ") + e.what());
        }
        return {};
    }

    // With specs: `,\n  "selection": {...}` naming both specs and the rows they matched.
    std::string selection_record() const {
        if (!source_spec_) return "";
        using ember_plugins::json_string;
        std::string targets;
        for (const std::string& t : target_rows_) targets += (targets.empty() ? "" : ", ") + t;
        return std::string(",\n  \"selection\": {") + json_string(source_key_) + ": " +
               json_string(source_spec_->to_string()) + ", " + json_string(selection_.select_key()) + ": " +
               json_string(selection_.spec()->to_string()) + ",\n    \"source_rows\": " +
               rows_json(source_rows_, source_spans_) + ",\n    \"target_rows\": [" + targets + "]}";
    }

    std::uint64_t stage_bits_ = 0;
    fs::path dir_;
    fs::path source_run_dir_;  // the directory of the run that captured the source; empty: not found
    fs::path record_path_;
    std::string name_;
    std::string seal_;
    std::string source_run_id_;
    std::size_t prompt_tokens_ = 0;
    std::set<std::size_t> requested_layers_;
    std::set<std::size_t> requested_positions_;
    bool positions_named_ = false;
    std::set<std::size_t> layers_held_;
    std::map<SiteKey, SourceArray> sources_;
    std::map<SiteKey, std::size_t> rows_written_;
    // By spec: the source's spec and its rows in the source's prompt; per target position
    // (this prefill's) the source position patched into it; each prefill's matched rows as JSON.
    const char* source_key_ = "select";
    std::optional<ember::selection::Spec> source_spec_;
    std::vector<ember::selection::TokenSpan> source_spans_;
    std::vector<ember::selection::Selected> source_rows_;
    std::vector<std::size_t> source_position_of_;
    std::vector<std::string> target_rows_;
};

}  // namespace

EMBER_EXPORT_EXPERIMENT(Patch, "patch", "1.0.0", "replace activations with ones captured in an earlier run")
