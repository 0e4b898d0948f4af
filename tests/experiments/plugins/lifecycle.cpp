// Test plugins for ABI 1.1's lifecycle services, built twice from this file:
//   skip-result     asks the host to skip the inference with cached ids (Host::skip_inference)
//   rewrite-prompt  (LIFECYCLE_REWRITE) replaces the prompt text (Host::rewrite_prompt)
// Config:
//   ids = [1, 2, 3]        skip-result: the supplied result
//   text = "..."           rewrite-prompt: the new prompt (default "Once upon a time there was")
//   text_hex = "4142ff"    rewrite-prompt: the new prompt as hex bytes (for bytes TOML cannot hold)
//   when = "before_prefill"  where to ask: before_prefill, on_model_loaded, after_layer (its
//                            first call) or on_generation_complete
//   on_refusal = "fail"    fail the stage with the host's reason, or "continue"
//   abort_at_end = false   abort() at the end of on_generation_complete (a crashed worker)
// Log lines (host log): "NAME answer=accepted" or "NAME answer=refused refusal=N reason=...",
// and "NAME complete stop=N generated=ID,ID,... prompt_tokens=N" in on_generation_complete.
#include <ember/experiment.hpp>

#include <cstdlib>
#include <string>
#include <vector>

namespace {

class Lifecycle : public ember::Experiment {
public:
    explicit Lifecycle(const ember::ExperimentConfig& config)
        : when_(config.get_string("when", "before_prefill")),
          fail_on_refusal_(config.get_string("on_refusal", "fail") == "fail"),
          text_(config.get_string("text", "Once upon a time there was")),
          abort_at_end_(config.get_bool("abort_at_end", false)) {
        const std::string hex = config.get_string("text_hex", "");
        if (!hex.empty()) {
            text_.clear();
            for (std::size_t i = 0; i + 1 < hex.size(); i += 2) text_ += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
        }
        for (std::int64_t id : config.get_int_list("ids", {1, 2, 3})) ids_.push_back(static_cast<std::uint32_t>(id));
    }

#ifdef LIFECYCLE_REWRITE
    const char* name() const override { return "rewrite-prompt"; }
#else
    const char* name() const override { return "skip-result"; }
#endif

    ember::Status on_model_loaded(const ember::ModelContext&) override { return ask_if("on_model_loaded"); }
    ember::Status before_prefill(const ember::ExecutionContext&) override { return ask_if("before_prefill"); }
    ember::Status after_layer(const ember::LayerContext&, ember::TensorAccess&) override {
        if (asked_after_layer_) return {};
        asked_after_layer_ = true;
        return ask_if("after_layer");
    }
    ember::Status on_generation_complete(const ember::GenerationContext& g) override {
        std::string ids;
        for (std::uint32_t id : ember::host().generated_token_ids()) ids += (ids.empty() ? "" : ",") + std::to_string(id);
        ember::host().info(std::string(name()) + " complete stop=" + std::to_string(static_cast<int>(g.stop_reason)) +
                           " generated=" + ids + " prompt_tokens=" +
                           std::to_string(ember::host().run_info().prompt_token_ids.size()));
        const ember::Status status = ask_if("on_generation_complete");
        if (abort_at_end_) std::abort();
        return status;
    }

private:
    ember::Status ask_if(const std::string& stage) {
        if (stage != when_) return {};
#ifdef LIFECYCLE_REWRITE
        const ember::HostAnswer answer = ember::host().rewrite_prompt(text_);
#else
        const ember::HostAnswer answer = ember::host().skip_inference(ids_);
#endif
        if (answer.accepted()) {
            ember::host().info(std::string(name()) + " answer=accepted");
            return {};
        }
        ember::host().info(std::string(name()) + " answer=refused refusal=" +
                           std::to_string(static_cast<int>(answer.refusal())) + " reason=" + answer.reason());
        return fail_on_refusal_ ? answer.status() : ember::Status{};
    }

    std::string when_;
    bool fail_on_refusal_;
    std::string text_;
    bool abort_at_end_;
    std::vector<std::uint32_t> ids_;
    bool asked_after_layer_ = false;
};

}  // namespace

#ifdef LIFECYCLE_REWRITE
EMBER_EXPORT_EXPERIMENT(Lifecycle, "rewrite-prompt")
#else
EMBER_EXPORT_EXPERIMENT(Lifecycle, "skip-result")
#endif
