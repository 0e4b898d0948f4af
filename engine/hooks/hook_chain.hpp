// Several ActiveHooks at the same stage sites, called in the order given: a run with
// experiments and an extraction chains the ExperimentRunner first and the Extractor
// second, so the extraction records the activations as the experiments left them (what
// the model then computed with).
#pragma once

#include <initializer_list>
#include <vector>

#include "hooks/hooks.hpp"

namespace ember::hooks {

class HookChain final : public ActiveHooks {
public:
    // Null entries are left out.
    HookChain(std::initializer_list<ActiveHooks*> hooks) {
        for (ActiveHooks* h : hooks)
            if (h != nullptr) hooks_.push_back(h);
    }
    bool empty() const { return hooks_.empty(); }
    // The only hooks, when there is exactly one (no chain needed), else this chain; null when empty.
    ActiveHooks* simplest() {
        if (hooks_.empty()) return nullptr;
        return hooks_.size() == 1 ? hooks_.front() : this;
    }

    void before_layer(const EvalInfo& eval, std::uint32_t layer, TensorView hidden) override {
        for (ActiveHooks* h : hooks_) h->before_layer(eval, layer, hidden);
    }
    void after_attention(const EvalInfo& eval, std::uint32_t layer, TensorView attention_output) override {
        for (ActiveHooks* h : hooks_) h->after_attention(eval, layer, attention_output);
    }
    void after_mlp(const EvalInfo& eval, std::uint32_t layer, TensorView mlp_output) override {
        for (ActiveHooks* h : hooks_) h->after_mlp(eval, layer, mlp_output);
    }
    void after_layer(const EvalInfo& eval, std::uint32_t layer, TensorView hidden) override {
        for (ActiveHooks* h : hooks_) h->after_layer(eval, layer, hidden);
    }
    void before_logits(const EvalInfo& eval, TensorView hidden) override {
        for (ActiveHooks* h : hooks_) h->before_logits(eval, hidden);
    }
    void after_logits(const EvalInfo& eval, TensorView logits) override {
        for (ActiveHooks* h : hooks_) h->after_logits(eval, logits);
    }

private:
    std::vector<ActiveHooks*> hooks_;
};

}  // namespace ember::hooks
