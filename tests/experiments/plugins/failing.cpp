// Test plugin: fails on purpose. Config:
//   stage = "after_attention"   where to fail ("constructor" fails while being created)
//   phase = "decode"            only in this phase (default: any)
//   layer = 1                   only at this layer (default: any)
//   how = "status"              "status" (Status::error), "throw" (std::runtime_error),
//                               "throw_other" (throws an int), "long" (a 5000-byte message
//                               of multi-byte characters), "bad_utf8" (the message followed
//                               by bytes that are not UTF-8: FF FE C3)
//   message = "..."             the message (default "planned failure")
// It logs "failing on_error ..." and "failing on_generation_complete" when told.
#include <ember/experiment.hpp>

#include <stdexcept>
#include <string>

namespace {

class Failing : public ember::Experiment {
public:
    explicit Failing(const ember::ExperimentConfig& config)
        : stage_(config.get_string("stage", "after_attention")),
          phase_(config.get_string("phase", "any")),
          layer_(config.get_int("layer", -1)),
          how_(config.get_string("how", "status")),
          message_(config.get_string("message", "planned failure")) {
        if (stage_ == "constructor") {
            const ember::Status status = fail_now();  // a constructor reports by throwing
            throw std::runtime_error(status.message());
        }
    }

    const char* name() const override { return "failing"; }

    ember::Status on_model_loaded(const ember::ModelContext&) override { return maybe("on_model_loaded", nullptr, -1); }
    ember::Status before_prefill(const ember::ExecutionContext& c) override { return maybe("before_prefill", &c, -1); }
    ember::Status before_layer(const ember::LayerContext& c, ember::TensorAccess&) override {
        return maybe("before_layer", &c, static_cast<long>(c.layer_index));
    }
    ember::Status after_attention(const ember::LayerContext& c, ember::TensorAccess&) override {
        return maybe("after_attention", &c, static_cast<long>(c.layer_index));
    }
    ember::Status after_mlp(const ember::LayerContext& c, ember::TensorAccess&) override {
        return maybe("after_mlp", &c, static_cast<long>(c.layer_index));
    }
    ember::Status after_layer(const ember::LayerContext& c, ember::TensorAccess&) override {
        return maybe("after_layer", &c, static_cast<long>(c.layer_index));
    }
    ember::Status before_logits(const ember::ExecutionContext& c, ember::TensorAccess&) override {
        return maybe("before_logits", &c, -1);
    }
    ember::Status after_logits(const ember::ExecutionContext& c, ember::TensorAccess&) override {
        return maybe("after_logits", &c, -1);
    }
    ember::Status on_generation_complete(const ember::GenerationContext&) override {
        ember::host().info("failing on_generation_complete");
        return maybe("on_generation_complete", nullptr, -1);
    }
    ember::Status on_error(const ember::GenerationContext&, std::string_view message) override {
        ember::host().info("failing on_error " + std::string(message));
        return maybe("on_error", nullptr, -1);
    }

private:
    ember::Status maybe(const char* stage, const ember::ExecutionContext* c, long layer) {
        if (stage_ != stage) return {};
        if (c && phase_ != "any" && phase_ != ember::phase_name(c->phase)) return {};
        if (layer_ >= 0 && layer != layer_) return {};
        return fail_now();
    }
    ember::Status fail_now() {
        if (how_ == "throw") throw std::runtime_error(message_);
        if (how_ == "throw_other") throw 42;
        if (how_ == "long") {
            std::string text;
            while (text.size() < 5000) text += "\xC3\xA9";  // "é", two bytes each
            return ember::Status::error(text);
        }
        if (how_ == "bad_utf8") return ember::Status::error(message_ + " \xFF\xFE\xC3");
        return ember::Status::error(message_);
    }

    std::string stage_, phase_;
    long layer_;
    std::string how_, message_;
};

}  // namespace

EMBER_EXPORT_EXPERIMENT(Failing)
