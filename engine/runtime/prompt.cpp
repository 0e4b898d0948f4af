#include "runtime/prompt.hpp"

#include <fmt/format.h>

#include <utility>

#include "common/error.hpp"
#include "common/input_file.hpp"

namespace ember::runtime {

namespace json = boost::json;

std::string read_prompt(const config::PromptSection& prompt) {
    if (prompt.text) return *prompt.text;
    if (!prompt.file) throw Error("the run has no prompt (prompt.text or prompt.file)");
    return read_input_file(*prompt.file, "prompt file");
}

EncodedPrompt encode_prompt(const tokenizer::Tokenizer& tok, std::string text, config::AddBos add_bos, bool special) {
    EncodedPrompt p;
    tokenizer::EncodeOptions options;
    if (add_bos != config::AddBos::Auto) options.add_bos = add_bos == config::AddBos::Yes;
    options.parse_special = special;
    p.tokens = tok.encode(text, options);
    p.text = std::move(text);
    for (const auto& t : p.tokens) p.ids.push_back(t.id);
    const bool wants_bos = options.add_bos.value_or(tok.info().add_bos);
    p.bos_added = wants_bos && tok.info().bos_id && !p.ids.empty() &&
                  p.ids.front() == static_cast<std::int32_t>(*tok.info().bos_id) && p.tokens.front().start == 0 &&
                  p.tokens.front().end == 0;
    return p;
}

EncodedPrompt encode_ids(const tokenizer::Tokenizer& tok, std::span<const std::int32_t> ids, std::string_view what) {
    if (ids.empty()) throw Error(fmt::format("{}: no token ids", what));
    EncodedPrompt p;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const std::int32_t id = ids[i];
        if (id < 0 || static_cast<std::size_t>(id) >= tok.vocab_size())
            throw Error(fmt::format("{}: id {} (index {}) is not in the vocabulary of {} tokens", what, id, i, tok.vocab_size()));
        const std::string piece = tok.piece(id, true);
        const std::size_t start = p.text.size();
        p.text += piece;
        p.tokens.push_back({id, start, p.text.size()});
        p.ids.push_back(id);
    }
    return p;
}

chat::LoadedTemplate load_run_template(const runtime::LoadedModel& model, const config::PromptSection& prompt) {
    const chat::TemplateChoice choice{prompt.chat_template, prompt.chat_template_name};
    return chat::load_template(choice, &model.file, model.path.string());
}

EncodedPrompt encode_chat_prompt(const runtime::LoadedModel& model, const chat::LoadedTemplate& t, json::object vars,
                                 std::string_view suffix) {
    chat::ChatPrompt rendered = chat::render_prompt(t, std::move(vars), &model.tokenizer);
    EncodedPrompt p;
    p.chat = chat::prompt_record(rendered);  // the rendering alone, without the suffix
    rendered.text += suffix;
    p.tokens = chat::tokenize_prompt(rendered, model.tokenizer);
    for (const auto& token : p.tokens) p.ids.push_back(token.id);
    p.bos_added = rendered.bos.added;
    selection::Conversation c;
    c.roles = rendered.roles;
    for (const chat::Origin& o : rendered.origins)
        if (o.message >= 0) c.bytes.push_back({o.begin, o.end, o.message});
    c.token_messages = chat::token_messages(p.tokens, rendered.origins);
    p.conversation = std::move(c);
    p.thinking_markers = rendered.thinking;
    p.text = std::move(rendered.text);
    return p;
}

EncodedPrompt encode_run_prompt(const runtime::LoadedModel& model, const config::PromptSection& prompt) {
    if (prompt.ids) return encode_ids(model.tokenizer, *prompt.ids, "prompt.ids (--ids)");
    if (!prompt.chat) return encode_prompt(model.tokenizer, read_prompt(prompt), prompt.add_bos, prompt.special);
    return encode_chat_prompt(model, load_run_template(model, prompt), *prompt.chat);
}

json::array token_messages_json(const EncodedPrompt& prompt) {
    json::array out;
    if (prompt.conversation)
        for (std::int32_t m : prompt.conversation->token_messages) out.push_back(m < 0 ? json::value(nullptr) : json::value(m));
    return out;
}

}  // namespace ember::runtime
