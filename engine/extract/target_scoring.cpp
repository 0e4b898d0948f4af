#include "extract/target_scoring.hpp"

#include <fmt/format.h>

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.hpp"
#include "runtime/prompt.hpp"

namespace ember::extract {

namespace json = boost::json;

TargetTokens split_target(runtime::EncodedPrompt evaluated, std::size_t prompt_bytes, std::string target, const std::string& name) {
    TargetTokens t;
    // The target's tokens are those starting at or after the prompt's end (BOS, empty at 0, is the prompt's).
    for (const tokenizer::Token& token : evaluated.tokens) {
        if (token.start < prompt_bytes && token.end > prompt_bytes)
            throw Error(fmt::format("{}: token {} (bytes {}-{}) straddles the end of the prompt and the start of the "
                                    "target: tokenized together they do not split there",
                                    name, token.id, token.start, token.end));
        if (token.start < prompt_bytes || (token.start == token.end && token.start == 0)) ++t.prompt_tokens;
    }
    if (t.prompt_tokens == evaluated.tokens.size()) throw Error(fmt::format("{}: the target has no tokens of its own", name));
    if (t.prompt_tokens == 0) throw Error(fmt::format("{}: the prompt has no tokens", name));
    t.evaluated = std::move(evaluated);
    t.target = std::move(target);
    return t;
}

TargetTokens encode_with_target(const tokenizer::Tokenizer& tok, const runtime::EncodedPrompt& prompt, const std::string& target,
                                const config::PromptSection& section, const std::string& name) {
    if (prompt.chat) throw UsageError(fmt::format("{}: a target goes with a text prompt or token ids, not a conversation", name));
    if (!section.ids)
        return split_target(runtime::encode_prompt(tok, prompt.text + target, section.add_bos, section.special), prompt.text.size(),
                            target, name);
    // Token ids: the target is tokenized as the continuation of the ids' text (their pieces
    // decoded, special tokens left out), so it splits as it would after that text; its
    // tokens follow the ids, their byte spans after the ids' pieces.
    tokenizer::EncodeOptions options;
    options.add_bos = false;
    options.parse_special = section.special;
    const std::string context = tok.decode(prompt.ids);
    runtime::EncodedPrompt joint;
    joint.tokens = tok.encode(context + target, options);
    for (const tokenizer::Token& token : joint.tokens) joint.ids.push_back(token.id);
    std::size_t first = 0;  // the target's first token in `joint`
    if (!context.empty()) {
        const TargetTokens split = split_target(std::move(joint), context.size(), target, name + " (after the ids' text)");
        first = split.prompt_tokens;
        joint = split.evaluated;
    } else if (joint.tokens.empty()) {
        throw Error(fmt::format("{}: the target has no tokens of its own", name));
    }
    runtime::EncodedPrompt evaluated = prompt;
    for (std::size_t i = first; i < joint.tokens.size(); ++i) {
        tokenizer::Token token = joint.tokens[i];
        token.start = token.start - context.size() + prompt.text.size();
        token.end = token.end - context.size() + prompt.text.size();
        evaluated.tokens.push_back(token);
        evaluated.ids.push_back(token.id);
    }
    evaluated.text += target;
    TargetTokens t;
    t.prompt_tokens = prompt.ids.size();
    t.evaluated = std::move(evaluated);
    t.target = target;
    return t;
}

TargetTokens encode_chat_with_target(const runtime::LoadedModel& model, const config::PromptSection& section,
                                     const std::string& target, const std::string& name) {
    if (!section.chat) throw Error(fmt::format("{}: the run's prompt is not a conversation", name));
    runtime::EncodedPrompt joint = runtime::encode_chat_prompt(model, runtime::load_run_template(model, section), *section.chat, target);
    const std::size_t rendered = joint.chat->at("rendered").as_string().size();
    return split_target(std::move(joint), rendered, target, name);
}

double token_logprob(const float* row, std::size_t n_vocab, std::int32_t id) {
    double max = -std::numeric_limits<double>::infinity();
    for (std::size_t v = 0; v < n_vocab; ++v) max = std::max(max, static_cast<double>(row[v]));
    double sum = 0;
    for (std::size_t v = 0; v < n_vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
    return static_cast<double>(row[id]) - (max + std::log(sum));
}

TargetScore score_target(std::span<const std::int32_t> ids, std::size_t prompt_tokens, kernels::ConstRows logits) {
    TargetScore s;
    for (std::size_t j = prompt_tokens; j < ids.size(); ++j) {
        s.logprobs.push_back(token_logprob(logits.data + (j - 1) * logits.cols, logits.cols, ids[j]));
        s.logprob += s.logprobs.back();
    }
    return s;
}

json::object piece_fields(const tokenizer::Tokenizer& tok, std::int32_t id) {
    const std::string piece = tok.piece(id, true);
    return {{"piece", record::piece_text(piece)}, {"piece_hex", record::hex(piece)}};
}

json::object target_record(const tokenizer::Tokenizer& tok, std::span<const std::int32_t> ids, std::size_t prompt_tokens,
                           const std::string& target, const TargetScore& s) {
    json::array tokens;
    for (std::size_t i = 0; i < s.logprobs.size(); ++i) {
        const std::size_t j = prompt_tokens + i;
        json::object token{{"position", j}, {"id", ids[j]}, {"logprob", s.logprobs[i]}};
        for (auto& [k, v] : piece_fields(tok, ids[j])) token[k] = v;
        tokens.push_back(std::move(token));
    }
    return {{"target", target}, {"logprob", s.logprob}, {"n_tokens", s.logprobs.size()}, {"tokens", std::move(tokens)}};
}

}  // namespace ember::extract
