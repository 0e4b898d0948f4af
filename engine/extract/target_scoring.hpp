// Target scoring (docs/extraction.md, "Target scoring"): the summed log-probability of a
// continuation under teacher forcing, log p(target | prompt) = sum over the target's
// tokens j of log softmax(logits[j - 1])[id_j]. One code for a dataset sample's `target`
// (dataset_extraction) and a single prompt's --target (ember extract, run, generate).
//
//   TargetTokens t = encode_with_target(tok, prompt, " الدرس", AddBos::Auto, false, "--target");
//   logits = session.prefill(t.evaluated.ids, /*all_logits=*/true, hooks);   // [T, n_vocab]
//   TargetScore s = score_target(t.evaluated.ids, t.prompt_tokens, logits);   s.logprob, s.logprobs
//   target_record(tok, t.evaluated.ids, t.prompt_tokens, t.target, s)        // the targets.jsonl fields
#pragma once

#include <boost/json/object.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "config/run_config.hpp"
#include "record/manifest.hpp"
#include "kernels/rows.hpp"
#include "runtime/prompt.hpp"
#include "tokenizer/tokenizer.hpp"

namespace ember::extract {

// The prompt and its target as one evaluation: `evaluated` holds the prompt's tokens, then
// the target's (from `prompt_tokens` on).
struct TargetTokens {
    runtime::EncodedPrompt evaluated;
    std::size_t prompt_tokens = 0;
    std::string target;
};

// The prompt's text and the target tokenized together (as a dataset sample's are), split at
// the prompt's end. ember::Error, prefixed with `name`, when a token straddles the prompt's
// end (tokenized together they do not split there), the target has no tokens of its own or
// the prompt has none.
TargetTokens split_target(runtime::EncodedPrompt evaluated, std::size_t prompt_bytes, std::string target, const std::string& name);

// A run's prompt with a target: a text prompt is tokenized together with it (split_target);
// a prompt given as token ids gets the target's tokens appended, as split_target splits
// them from the ids' text (their pieces decoded) tokenized with the target, no BOS.
TargetTokens encode_with_target(const tokenizer::Tokenizer& tok, const runtime::EncodedPrompt& prompt, const std::string& target,
                                const config::PromptSection& section, const std::string& name);

// A conversation's prompt (section.chat) with a target: the target continues the rendered
// text (after the generation prompt, when the template writes one) and is tokenized with
// it, as a dataset conversation's target is (special-token texts parsed, no second BOS),
// then split at the rendering's end (split_target's errors).
TargetTokens encode_chat_with_target(const runtime::LoadedModel& model, const config::PromptSection& section,
                                     const std::string& target, const std::string& name);

struct TargetScore {
    std::vector<double> logprobs;  // per target token, in double
    double logprob = 0;            // their sum
};

// log softmax(row)[id] in double: row[id] - logsumexp(row).
double token_logprob(const float* row, std::size_t n_vocab, std::int32_t id);

// The target is ids[prompt_tokens..]; from the logits of every evaluated row [T, n_vocab]:
// logits[j - 1][id_j] - logsumexp(logits[j - 1]), in double.
TargetScore score_target(std::span<const std::int32_t> ids, std::size_t prompt_tokens, kernels::ConstRows logits);

// {"target", "logprob", "n_tokens", "tokens": [{position, id, logprob, piece, piece_hex}]}:
// a targets.jsonl line without its sample fields (docs/formats.md).
boost::json::object target_record(const tokenizer::Tokenizer& tok, std::span<const std::int32_t> ids,
                                  std::size_t prompt_tokens, const std::string& target, const TargetScore& s);

// A token's piece as the records write it: {"piece": text or null, "piece_hex": hex}.
boost::json::object piece_fields(const tokenizer::Tokenizer& tok, std::int32_t id);

}  // namespace ember::extract
