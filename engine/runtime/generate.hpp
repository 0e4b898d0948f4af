// The generation loop: one prefill evaluation of the prompt, then one decode evaluation
// per further token, choosing each token with a Sampler, stopping after max_tokens or at
// an end-of-generation token. A run that generates N tokens evaluates the prompt once
// and N - 1 single tokens: the last token is chosen but not evaluated.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "hooks/hooks.hpp"
#include "hooks/stop_reason.hpp"
#include "runtime/sampler.hpp"
#include "runtime/session.hpp"

namespace ember::runtime {

// Skipped: nothing was evaluated, an experiment supplied the tokens (ABI 1.1 skip_inference;
// app/run_job.cpp makes such a result, generate() never returns it).
// Why a generation ended: the host's list (hooks/stop_reason.hpp, from plugin.h's one list).
using hooks::StopReason;
using hooks::stop_reason_name;  // "max_tokens", "end_of_generation", "skipped", ...

struct GenerationOptions {
    std::size_t max_tokens = 32;
    SamplingOptions sampling;
    // The prefill computes the logits (and final norm) of every prompt position, not only
    // the last: the logits hook stages then see every row (an extraction asks for this).
    // The first token is still chosen from the last position's logits.
    bool all_prompt_logits = false;
};

struct GenerationStep {
    std::int32_t token = -1;
    float logit = 0.0f;   // the token's logit
    float margin = 0.0f;  // its logit minus the best other logit
};

struct GenerationTimings {
    double prefill_ms = 0;
    double decode_ms = 0;  // all decode evaluations together
    std::size_t decode_evaluations = 0;
    double sampling_ms = 0;
};

struct GenerationResult {
    // The generated tokens; an end-of-generation token ends the run and is not included.
    std::vector<std::int32_t> tokens;
    std::vector<GenerationStep> steps;  // one per token in `tokens`
    StopReason stop_reason = StopReason::MaxTokens;
    GenerationTimings timings;
};

// Generates from `prompt`, resetting the session to position 0 first. Checks first that the prompt
// and max_tokens fit in the context, and throws ember::Error naming --ctx if not.
// `on_token` is called with each generated token as soon as it is chosen.
GenerationResult generate(Session& session, std::span<const std::int32_t> prompt, const GenerationOptions& options,
                          const std::function<bool(std::int32_t)>& is_end_of_generation,
                          const std::function<void(std::int32_t)>& on_token = {}, hooks::ActiveHooks* hooks = nullptr);

}  // namespace ember::runtime
