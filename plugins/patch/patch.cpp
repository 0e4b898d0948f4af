// patch: replaces activations with ones a `capture` experiment saved in an earlier run
// (activation patching). Route-locked: the source must come from the same model file
// (sha256), a prompt of the same length and the same route, or patch refuses it by name.
//
//   [[experiment]]
//   plugin = "build/plugins/libpatch.so"
//   [experiment.config]
//   source = "runs/clean/capture"  # a capture directory (or its manifest.json), relative to this TOML file
//   stages = ["after_layer"]       # default: every stage the source holds
//   layers = [3]                   # or "all" (default)
//   positions = [4]                # or "last", or "all" (default)
//   phase = "prefill"              # or "decode", or "all" (default)
//
// head_outputs and mlp_activation patch like the block stages (rows by position);
// attention_pattern is read-only: refused when named, skipped in a source otherwise.
//
// At a selected site, every selected row whose position the source captured is
// overwritten with the captured row; other rows are left alone.
#include <ember/experiment.hpp>
#include <ember/npy.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/selection.hpp"
#include "common/stage_experiment.hpp"

namespace {

namespace fs = std::filesystem;
using ember_plugins::Selection;
using ember_plugins::Stage;

// One captured array: rows by token position.
struct SourceArray {
    std::size_t cols = 0;
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

class Patch : public ember_plugins::StageExperiment {
public:
    explicit Patch(const ember::ExperimentConfig& config)
        : selection_(config, ember_plugins::writable_stages()) {
        config.expect_only({"source", "stage", "stages", "layers", "positions", "phase"});
        selection_.refuse_read_only("patch");
        if (!config.has("source")) throw ember::ConfigError("config key 'source' (a capture directory) is required");
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
        check_route_lock(member(manifest, "run", name_));
        load_arrays(member(manifest, "arrays", name_));
    }

    const char* name() const override { return "patch"; }
    // Only the stages the source holds.
    std::uint64_t subscribed_stages() const override { return stage_bits_; }

    ember::Status on_model_loaded(const ember::ModelContext& model) override { return selection_.check_layers(model); }

private:
    // The source must describe this very computation: same model bytes, prompt length, route.
    void check_route_lock(const ember::JsonValue& run) const {
        const ember::RunInfo here = ember::host().run_info();
        const std::string sha = member(run, "model_sha256", name_).as_string();
        if (sha != here.model_sha256)
            throw std::runtime_error(name_ + " was captured from another model (sha256 " + sha + "), this run's is " +
                                     std::string(here.model_sha256));
        const std::size_t tokens = member(run, "prompt_token_ids", name_).items().size();
        if (tokens != here.prompt_token_ids.size())
            throw std::runtime_error(name_ + " has a " + std::to_string(tokens) + "-token prompt, this run's has " +
                                     std::to_string(here.prompt_token_ids.size()));
        const std::string route = member(run, "route", name_).as_string();
        if (route != here.route)
            throw std::runtime_error(name_ + " was captured on route '" + route + "', this run uses '" +
                                     std::string(here.route) + "'");
    }

    void load_arrays(const ember::JsonValue& arrays) {
        for (const ember::JsonValue& a : arrays.items()) {
            const auto stage = ember_plugins::stage_from_name(member(a, "stage", name_).as_string());
            if (!stage) throw std::runtime_error(name_ + ": unknown stage in manifest");
            const ember::JsonValue& layer_value = member(a, "layer", name_);
            const std::optional<std::size_t> layer =
                layer_value.is_integer() ? std::optional<std::size_t>(layer_value.as_integer()) : std::nullopt;
            const auto phase = member(a, "phase", name_).as_string() == "prefill" ? ember::ExecutionPhase::Prefill
                                                                                  : ember::ExecutionPhase::Decode;
            if (!selection_.wants_site(*stage, phase, layer)) continue;
            stage_bits_ |= std::uint64_t{1} << *stage;

            const fs::path file = dir_ / member(a, "file", name_).as_string();
            ember::npy::Array npy = ember::npy::read(file);
            const auto& positions = member(a, "positions", name_).items();
            if (npy.shape.size() != 2 || npy.shape[0] != positions.size())
                throw std::runtime_error(name_ + ": " + file.filename().string() + " does not match its manifest entry");
            SourceArray source;
            source.cols = npy.shape[1];
            for (std::size_t row = 0; row < positions.size(); ++row)
                source.row_of_position[static_cast<std::size_t>(positions[row].as_integer())] = row;
            source.values = std::move(npy.values);
            sources_[site_key(*stage, layer, phase)] = std::move(source);
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
        selection_.for_each_row(stage, ctx, tensor, [&](std::size_t row, std::size_t position) {
            const auto found = source.row_of_position.find(position);
            if (found == source.row_of_position.end()) return;
            const float* from = source.values.data() + found->second * source.cols;
            auto to = tensor.row_mut(row);
            std::copy(from, from + source.cols, to.begin());
        });
        return {};
    }

    const Selection& selection() const override { return selection_; }

    Selection selection_;
    std::uint64_t stage_bits_ = 0;
    fs::path dir_;
    std::string name_;
    std::map<SiteKey, SourceArray> sources_;
};

}  // namespace

EMBER_EXPORT_EXPERIMENT(Patch, "patch", "1.0.0", "replace activations with ones captured in an earlier run")
