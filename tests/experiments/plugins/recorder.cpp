// Test plugin: logs every call it receives through the host log, so a test sees the
// order, the contexts and the values each stage saw. Config:
//   tag = "a"      prefix of every line (default: "recorder")
//   add = 1.0      added to every value of every tensor it sees, after logging (default 0)
// Lines: "TAG create run_id=... config_dir=... prompt_tokens=N",
//        "TAG before_layer phase=prefill layer=0 start=0 count=3 rows=3 cols=4 first=1.5 pos=-", ...
#include <ember/experiment.hpp>

#include <cstdio>
#include <string>

namespace {

std::string fmt_float(float v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
    return buf;
}

class Recorder : public ember::Experiment {
public:
    explicit Recorder(const ember::ExperimentConfig& config)
        : tag_(config.get_string("tag", "recorder")), add_(static_cast<float>(config.get_double("add", 0.0))) {
        const auto info = ember::host().run_info();
        ember::host().info(tag_ + " create run_id=" + std::string(info.run_id) + " config_dir=" +
                           std::string(info.config_dir) + " prompt_tokens=" +
                           std::to_string(info.prompt_token_ids.size()) + " sha=" + std::string(info.model_sha256) +
                           " route=" + std::string(info.route) + " output_dir=" + std::string(info.output_dir) +
                           " config_hash=" + std::string(info.config_hash) + " model_path=" +
                           std::string(info.model_path));
    }
    ~Recorder() override { ember::host().info(tag_ + " destroy"); }

    const char* name() const override { return "recorder"; }

    ember::Status on_model_loaded(const ember::ModelContext& m) override {
        ember::host().info(tag_ + " on_model_loaded name=" + std::string(m.model_name) + " layers=" +
                           std::to_string(m.n_layers) + " embd=" + std::to_string(m.n_embd) + " vocab=" +
                           std::to_string(m.n_vocab) + " family=" + std::to_string(static_cast<int>(m.family)));
        return {};
    }
    ember::Status before_prefill(const ember::ExecutionContext& c) override {
        ember::host().info(tag_ + " before_prefill " + describe(c));
        return {};
    }
    ember::Status before_layer(const ember::LayerContext& c, ember::TensorAccess& t) override {
        return tensor("before_layer", c, &c.layer_index, t);
    }
    ember::Status after_attention(const ember::LayerContext& c, ember::TensorAccess& t) override {
        return tensor("after_attention", c, &c.layer_index, t);
    }
    ember::Status after_mlp(const ember::LayerContext& c, ember::TensorAccess& t) override {
        return tensor("after_mlp", c, &c.layer_index, t);
    }
    ember::Status after_layer(const ember::LayerContext& c, ember::TensorAccess& t) override {
        return tensor("after_layer", c, &c.layer_index, t);
    }
    ember::Status before_logits(const ember::ExecutionContext& c, ember::TensorAccess& t) override {
        return tensor("before_logits", c, nullptr, t);
    }
    ember::Status after_logits(const ember::ExecutionContext& c, ember::TensorAccess& t) override {
        return tensor("after_logits", c, nullptr, t);
    }
    ember::Status on_generation_complete(const ember::GenerationContext& g) override {
        ember::host().info(tag_ + " on_generation_complete " + describe(g));
        return {};
    }
    ember::Status on_error(const ember::GenerationContext& g, std::string_view message) override {
        ember::host().info(tag_ + " on_error " + describe(g) + " message=" + std::string(message));
        return {};
    }

private:
    static std::string describe(const ember::ExecutionContext& c) {
        const auto pos = c.token_position();
        return std::string("phase=") + std::string(ember::phase_name(c.phase)) + " start=" +
               std::to_string(c.start_position) + " count=" + std::to_string(c.input_token_count) +
               " seq=" + std::to_string(c.sequence_length()) + " pos=" + (pos ? std::to_string(*pos) : "-") +
               " tracing=" + (c.tracing == ember::TracingState::Enabled ? "on" : "off");
    }
    static std::string describe(const ember::GenerationContext& g) {
        return "generated=" + std::to_string(g.generated_tokens) + " prompt=" + std::to_string(g.prompt_tokens) +
               " stop=" + std::to_string(static_cast<int>(g.stop_reason)) + " run_id=" + std::string(g.run_id) +
               " model=" + std::string(g.model.model_name);
    }
    ember::Status tensor(const char* stage, const ember::ExecutionContext& c, const std::size_t* layer,
                         ember::TensorAccess& t) {
        ember::host().info(tag_ + " " + stage + " " + describe(c) + (layer ? " layer=" + std::to_string(*layer) : "") +
                           " rows=" + std::to_string(t.shape()[0]) + " cols=" + std::to_string(t.shape()[1]) +
                           " first=" + fmt_float(t.values()[0]));
        if (add_ != 0.0f)
            for (float& v : t.values_mut()) v += add_;
        return {};
    }

    std::string tag_;
    float add_;
};

}  // namespace

EMBER_EXPORT_EXPERIMENT(Recorder)
