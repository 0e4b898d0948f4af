// capture: saves chosen activations as .npy files (float32, C order) in the run's output
// directory, with a manifest.json recording the run (model sha256, route, config hash,
// prompt token ids) and, for every array, its stage, layer, phase and token positions.
//
//   [[experiment]]
//   plugin = "build/plugins/libcapture.so"
//   [experiment.config]
//   stages = ["after_layer"]   # default ["after_layer"]
//   layers = "all"             # or [0, 3]
//   positions = "all"          # or "last", or [0, 3]
//   select = "substring:كتب"   # instead of positions: a selection spec on the prompt's text
//   phase = "all"              # or "prefill", "decode"
//   dir = "capture"            # a subdirectory of the run's output directory (default "capture")
//
// Every array entry says which spec selected its rows ("select", null with positions) and,
// per row, the token's byte span in its prompt ("byte_spans", [start, end], null for a
// generated token) and, with a spec, whether it only partly covers the anchored bytes
// ("partial"). The manifest's "run" records the prompt's text and token spans beside its
// ids (as the host gave them at create: empty in a dataset run), which patch's
// source_select resolves against.
//
// One array per (stage, layer, phase): rows are the selected positions in the order they
// were computed (prefill: the prompt's; decode: one row per step). attention_pattern
// (handed head-major, [n_head * T, n_kv] per evaluation, its width growing with every
// decode step) gives one array per (layer, evaluation): attention_pattern.layerL.prefill.npy
// and attention_pattern.layerL.decode.stepS.npy, written as `ember extract` writes it:
// [positions, heads, n_kv], [i, j] being head heads[j] of positions[i] (the manifest's
// "positions" and "heads" name the two axes, "layout" says so); `heads = [...]` keeps only
// those heads (all by default). Files are written
// when the generation completes (manifest "complete": true) or when the run fails
// (whatever was captured, "complete": false); each file is written to a temporary name
// and renamed, the manifest last. The manifest is sealed like the run's (its "files"
// table lists every array with size and SHA-256, "manifest_sha256" last), so `ember verify`
// checks a capture directory on its own, and the run's manifest covers it too. `dir` must
// lie strictly inside the run's output directory: outside it the seal of the run would not
// cover it, and the directory itself would have the run's manifest overwrite capture's.
#include <ember/experiment.hpp>
#include <ember/manifest_seal.hpp>
#include <ember/npy.hpp>
#include <ember/sha256.hpp>

#include <filesystem>
#include <map>
#include <span>
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

// The captured rows of one (stage, layer, phase).
struct Series {
    Stage stage;
    std::optional<std::size_t> layer;
    ember::ExecutionPhase phase;
    std::size_t cols = 0;
    std::optional<std::size_t> step;  // attention_pattern in decode: one array per step
    std::vector<std::size_t> positions;
    std::vector<std::size_t> heads;  // attention_pattern: the heads along the second axis
    std::vector<std::optional<ember::selection::TokenSpan>> spans;  // each row's, none for a generated token
    std::vector<bool> partial;                                      // each row's, with a spec
    std::vector<float> values;  // [positions.size(), cols]; attention_pattern [positions.size(), heads.size(), cols]

    std::vector<std::size_t> shape() const {
        if (stage == EMBER_STAGE_ATTENTION_PATTERN) return {positions.size(), heads.size(), cols};
        return {positions.size(), cols};
    }

    std::string file_name() const {
        std::string name = ember_plugins::stage_name(stage);
        if (layer) name += ".layer" + std::to_string(*layer);
        name += "." + std::string(ember::phase_name(phase));
        if (step) name += ".step" + std::to_string(*step);
        return name + ".npy";
    }
};

// `dir` (relative to the run's output directory, or absolute) made absolute; a
// ConfigError naming it unless it lies strictly inside `run_dir`.
fs::path inside_run_directory(const std::string& dir, const fs::path& run_dir) {
    const fs::path run = run_dir.lexically_normal();
    const fs::path path = (fs::path(dir).is_absolute() ? fs::path(dir) : run / dir).lexically_normal();
    const fs::path relative = path.lexically_relative(run);
    const bool inside = !relative.empty() && *relative.begin() != ".." && relative != ".";
    if (!inside)
        throw ember::ConfigError("config key 'dir' = '" + dir + "' is " +
                                 (relative == "." || (relative.empty() && path == run) ? "the run's output directory itself"
                                                                                       : "outside the run's output directory") +
                                 " (" + run.string() + "); capture writes its own sealed manifest.json, so give it a "
                                 "subdirectory such as \"capture\"");
    return path;
}

class Capture : public ember_plugins::StageExperiment {
public:
    explicit Capture(const ember::ExperimentConfig& config)
        : StageExperiment(Selection(config, {EMBER_STAGE_AFTER_LAYER})) {
        config.expect_only({"stage", "stages", "layers", "positions", "select", "phase", "dir", "heads"});
        const ember::RunInfo info = ember::host().run_info();
        if (info.output_dir.empty()) throw std::runtime_error("capture needs the run's output directory; the host gave none");
        dir_ = inside_run_directory(config.get_string("dir", "capture"), fs::path(std::string(info.output_dir)));
        run_id_ = info.run_id;
        model_path_ = info.model_path;
        model_sha256_ = info.model_sha256;
        route_ = info.route;
        config_hash_ = info.config_hash;
        prompt_token_ids_.assign(info.prompt_token_ids.begin(), info.prompt_token_ids.end());
        prompt_text_ = ember::host().prompt_text();
        prompt_spans_ = ember_plugins::to_token_spans(ember::host().prompt_token_spans());
    }

    // The spec's rows in this prompt, and the prompt's token spans for the rows' records.
    ember::Status before_prefill(const ember::ExecutionContext& ctx) override {
        if (auto s = StageExperiment::before_prefill(ctx); !s.ok()) return s;
        spans_ = ember_plugins::to_token_spans(ember::host().prompt_token_spans());
        return {};
    }

    const char* name() const override { return "capture"; }

    ember::Status on_model_loaded(const ember::ModelContext& model) override {
        model_ = "{\"family\": " + ember_plugins::json_string(ember::family_name(model.family)) +
                 ", \"name\": " + ember_plugins::json_string(model.model_name) +
                 ", \"n_layers\": " + std::to_string(model.n_layers) + ", \"n_embd\": " + std::to_string(model.n_embd) +
                 ", \"n_vocab\": " + std::to_string(model.n_vocab) + "}";
        return selection_.check_layers(model);
    }

    ember::Status on_generation_complete(const ember::GenerationContext&) override {
        write(true, "");
        return {};
    }
    ember::Status on_error(const ember::GenerationContext&, std::string_view message) override {
        write(false, message);
        return {};
    }

private:
    ember::Status act(Stage stage, const ember::ExecutionContext& ctx, std::optional<std::size_t> layer,
                         ember::TensorAccess& tensor) override {
        if (!selection_.wants(stage, ctx, layer)) return {};
        const bool pattern = stage == EMBER_STAGE_ATTENTION_PATTERN;
        const std::optional<std::size_t> step =
            pattern && ctx.phase == ember::ExecutionPhase::Decode ? std::optional<std::size_t>(ctx.decode_step) : std::nullopt;
        const auto key = std::make_tuple(static_cast<int>(stage), layer ? static_cast<long>(*layer) : -1L,
                                         static_cast<int>(ctx.phase), step ? static_cast<long>(*step) : -1L);
        auto [it, fresh] = series_.try_emplace(key, Series{stage, layer, ctx.phase, 0, step, {}, {}, {}, {}, {}});
        Series& s = it->second;
        if (fresh) s.cols = tensor.shape()[1];
        if (s.cols != tensor.shape()[1])
            return ember::Status::error("activation width changed from " + std::to_string(s.cols) + " to " +
                                        std::to_string(tensor.shape()[1]));
        auto keep_position = [&](std::size_t position) {
            s.positions.push_back(position);
            s.spans.push_back(ctx.phase == ember::ExecutionPhase::Prefill && position < spans_.size()
                                  ? std::optional(spans_[position])
                                  : std::nullopt);
            if (selection_.spec()) s.partial.push_back(is_partial(position));
        };
        if (pattern) return keep_pattern(s, ctx, tensor, fresh, keep_position);
        selection_.for_each_row(stage, ctx, tensor, [&](std::size_t row, std::size_t position) {
            const auto values = tensor.row(row);
            s.values.insert(s.values.end(), values.begin(), values.end());
            keep_position(position);
        });
        return {};
    }

    // attention_pattern: the hook's head-major rows (h * T + t) reordered position-major,
    // [position, head, n_kv], as `ember extract` writes them.
    template <class KeepPosition>
    ember::Status keep_pattern(Series& s, const ember::ExecutionContext& ctx, const ember::TensorAccess& tensor, bool fresh,
                               KeepPosition&& keep_position) const {
        const std::size_t T = ctx.input_token_count;
        const std::size_t n_head = T == 0 ? 0 : tensor.shape()[0] / T;
        if (fresh) {
            for (std::size_t h : selection_.heads())
                if (h >= n_head) return Selection::head_error(h, n_head);
            for (std::size_t h = 0; h < n_head; ++h)
                if (selection_.wants_head(h)) s.heads.push_back(h);
        }
        for (std::size_t t = 0; t < T; ++t) {
            const std::size_t position = ctx.start_position + t;
            if (!selection_.wants_position(position, ctx.sequence_length())) continue;
            for (std::size_t h : s.heads) {
                const auto values = tensor.row(h * T + t);
                s.values.insert(s.values.end(), values.begin(), values.end());
            }
            keep_position(position);
        }
        return {};
    }

    bool is_partial(std::size_t position) const {
        for (const auto& row : selection_.selected())
            if (row.position == position) return row.partial;
        return false;
    }

    // Each row's byte span, null for a generated token.
    static std::string spans_json(const Series& s) {
        std::string out = "[";
        for (std::size_t i = 0; i < s.spans.size(); ++i)
            out += std::string(i ? ", " : "") +
                   (s.spans[i] ? ember_plugins::json_span(s.spans[i]->start, s.spans[i]->end) : std::string("null"));
        return out + "]";
    }

    void write(bool complete, std::string_view error) const {
        using ember_plugins::json_string;
        fs::create_directories(dir_);
        std::string arrays, files;
        for (const auto& [key, s] : series_) {
            const std::vector<std::size_t> shape = s.shape();
            const std::string header = ember::npy::header("<f4", shape);
            const std::size_t bytes = s.values.size() * sizeof(float);
            ember::npy::write_file_atomically(dir_ / s.file_name(), header, s.values.data(), bytes);
            ember::Sha256 sha;
            sha.update(header);
            sha.update(std::as_bytes(std::span(s.values)));
            files += std::string(files.empty() ? "\n    " : ",\n    ") + json_string(s.file_name()) +
                     ": {\"bytes\": " + std::to_string(header.size() + bytes) + ", \"sha256\": " +
                     json_string(sha.finish_hex()) + "}";
            arrays += std::string(arrays.empty() ? "\n    " : ",\n    ") +
                      "{\"file\": " + json_string(s.file_name()) +
                      ", \"stage\": " + json_string(ember_plugins::stage_name(s.stage)) +
                      ", \"layer\": " + (s.layer ? std::to_string(*s.layer) : "null") +
                      ", \"phase\": " + json_string(ember::phase_name(s.phase)) +
                      ", \"positions\": " + ember_plugins::json_int_array(s.positions) +
                      (s.heads.empty() ? "" : ", \"heads\": " + ember_plugins::json_int_array(s.heads)) +
                      ", \"select\": " + (selection_.spec() ? json_string(selection_.spec()->to_string()) : "null") +
                      ", \"byte_spans\": " + spans_json(s) +
                      (selection_.spec() ? ", \"partial\": " + ember_plugins::json_bool_array(s.partial) : "") +
                      (s.step ? ", \"step\": " + std::to_string(*s.step) : "") +
                      (s.heads.empty() ? "" : ", \"layout\": \"[positions, heads, n_kv]\"") +
                      ", \"shape\": " + ember_plugins::json_int_array(shape) + ", \"dtype\": \"float32\"}";
        }
        const std::string manifest =
            "{\n  \"schema_version\": 1,\n  \"kind\": \"ember.capture\",\n  \"run_id\": " + json_string(run_id_) +
            ",\n  \"complete\": " + std::string(complete ? "true" : "false") +
            (complete ? "" : ",\n  " + ember_plugins::json_member("error", error)) + ",\n  \"run\": {\"run_id\": " +
            json_string(run_id_) + ", \"model_path\": " + json_string(model_path_) +
            ", \"model_sha256\": " + json_string(model_sha256_) + ", \"route\": " + json_string(route_) +
            ", \"config_hash\": " + json_string(config_hash_) +
            ", \"prompt_token_ids\": " + ember_plugins::json_int_array(prompt_token_ids_) + ", " +
            ember_plugins::json_member("prompt_text", prompt_text_) + ", \"prompt_token_spans\": " + prompt_spans_json() +
            "},\n  \"model\": " +
            (model_.empty() ? "null" : model_) + ",\n  \"arrays\": [" + arrays + (arrays.empty() ? "" : "\n  ") +
            "],\n  \"files\": {" + files + (files.empty() ? "" : "\n  ") + "},\n  " +
            ember::seal::member(ember::seal::zeros()) + "\n}\n";
        const std::string sealed = ember::seal::sealed(manifest);
        ember::npy::write_file_atomically(dir_ / "manifest.json", sealed, nullptr, 0);
    }

    std::string prompt_spans_json() const {
        std::string out = "[";
        for (std::size_t i = 0; i < prompt_spans_.size(); ++i)
            out += std::string(i ? ", " : "") + ember_plugins::json_span(prompt_spans_[i].start, prompt_spans_[i].end);
        return out + "]";
    }

    fs::path dir_;
    std::string run_id_, model_path_, model_sha256_, route_, config_hash_;
    std::vector<std::uint32_t> prompt_token_ids_;
    std::string prompt_text_;                                // the run's prompt, as at create
    std::vector<ember::selection::TokenSpan> prompt_spans_;  // its tokens' byte spans
    std::vector<ember::selection::TokenSpan> spans_;         // the current prompt's (set at before_prefill)
    std::string model_;
    std::map<std::tuple<int, long, int, long>, Series> series_;
};

}  // namespace

EMBER_EXPORT_EXPERIMENT(Capture, "capture", "1.0.0", "save chosen activations as .npy files with a manifest")
