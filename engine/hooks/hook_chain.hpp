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

    void stage(Stage stage, const EvalInfo& eval, std::uint32_t layer, TensorView tensor) override {
        for (ActiveHooks* h : hooks_) h->stage(stage, eval, layer, tensor);
    }
    bool wants(Stage stage) const override {
        for (const ActiveHooks* h : hooks_)
            if (h->wants(stage)) return true;
        return false;
    }

private:
    std::vector<ActiveHooks*> hooks_;
};

}  // namespace ember::hooks
