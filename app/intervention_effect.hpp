// What a run's experiments did to the model's prediction (run.json "effect", docs/experiments.md
// "The effect of an intervention"): the run's next-token distribution at the prompt's last
// position against the same prompt evaluated without the experiments (and SAEs). A patch
// run records it next to its logits.
//
//   LastLogitsTap tap(hooks);                       // around the generation's hooks
//   ... generate(..., &tap) ...                     // tap.logits(): the edited run's last row
//   effect_json(tap.logits(), unedited_row, tok, target_pair)
#pragma once

#include <boost/json/object.hpp>

#include <optional>
#include <span>
#include <vector>

#include "hooks/hooks.hpp"
#include "tokenizer/tokenizer.hpp"

namespace ember::app {

// Forwards every stage to `downstream` and keeps the logits the prefill ends with (its
// after_logits rows' last one, after every downstream hook acted): what the run sampled from.
class LastLogitsTap final : public hooks::ActiveHooks {
public:
    explicit LastLogitsTap(hooks::ActiveHooks* downstream) : downstream_(downstream) {}
    void stage(hooks::Stage stage, const hooks::EvalInfo& eval, std::uint32_t layer, hooks::TensorView tensor) override;
    bool wants(hooks::Stage stage) const override;
    const std::vector<float>& logits() const { return logits_; }  // [n_vocab]; empty: no prefill seen

private:
    hooks::ActiveHooks* downstream_;
    std::vector<float> logits_;
};

// A target's summed log-probability with and without the experiments.
struct TargetPair {
    double edited = 0;
    double unedited = 0;
};

// {"against", "kl_unedited_edited" (nats, KL(unedited || edited) of the softmaxes, in
// double), "top_token": {id, piece, edited_logit, unedited_logit, logit_diff} for the
// unedited run's most likely token, "target": {edited_logprob, unedited_logprob, delta}}.
boost::json::object effect_json(std::span<const float> edited, std::span<const float> unedited,
                                const tokenizer::Tokenizer& tok, const std::optional<TargetPair>& target);

}  // namespace ember::app
