#include "chat/chat_prompt.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "common/sha256_file.hpp"

namespace ember::chat {
namespace {

namespace json = boost::json;

std::string_view json_kind(const json::value& v) {
    switch (v.kind()) {
        case json::kind::null: return "null";
        case json::kind::bool_: return "a boolean";
        case json::kind::int64: case json::kind::uint64: case json::kind::double_: return "a number";
        case json::kind::string: return "a string";
        case json::kind::array: return "a list";
        case json::kind::object: return "an object";
    }
    return "?";
}

std::string read_bytes(const std::filesystem::path& path, std::string_view what, std::size_t limit) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) throw Error(fmt::format("{}: cannot read the {}: {}", path.string(), what, ec.message()));
    if (size > limit)
        throw Error(fmt::format("{}: the {} is {} bytes, more than the limit of {} bytes", path.string(), what, size, limit));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt::format("{}: cannot open the {}", path.string(), what));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

void check_vars(const json::object& vars, const std::string& where) {
    if (const auto* m = vars.if_contains("messages")) {
        if (!m->is_array()) throw Error(fmt::format("{}: 'messages' must be a list of messages, not {}", where, json_kind(*m)));
        const auto& list = m->get_array();
        for (std::size_t i = 0; i < list.size(); ++i) {
            if (!list[i].is_object())
                throw Error(fmt::format("{}: messages[{}] must be an object with a role, not {}", where, i, json_kind(list[i])));
            const auto* role = list[i].get_object().if_contains("role");
            if (!role || !role->is_string()) throw Error(fmt::format("{}: messages[{}] needs a string 'role'", where, i));
        }
    }
    for (const char* key : {"add_generation_prompt", "enable_thinking"}) {
        if (const auto* v = vars.if_contains(key); v && !v->is_bool())
            throw Error(fmt::format("{}: '{}' must be true or false, not {}", where, key, json_kind(*v)));
    }
    if (const auto* t = vars.if_contains("tools"); t && !t->is_array() && !t->is_null())
        throw Error(fmt::format("{}: 'tools' must be a list, not {}", where, json_kind(*t)));
    for (const char* key : {"bos_token", "eos_token"}) {
        if (const auto* v = vars.if_contains(key); v && !v->is_string())
            throw Error(fmt::format("{}: '{}' must be a string, not {}", where, key, json_kind(*v)));
    }
}

json::object read_vars_file(const std::filesystem::path& path) {
    const std::string text = read_bytes(path, "chat variables", std::size_t{64} << 20);
    json::error_code ec;
    json::value v = json::parse(text, ec);
    if (ec) throw Error(fmt::format("{}: not valid JSON: {}", path.string(), ec.message()));
    if (!v.is_object()) throw Error(fmt::format("{}: the chat variables must be a JSON object, not {}", path.string(), json_kind(v)));
    check_vars(v.get_object(), path.string());
    return std::move(v.get_object());
}

LoadedTemplate load_template(const TemplateChoice& choice, const gguf::File* model, const std::string& model_path) {
    std::string text, source, name;
    if (choice.file) {
        source = choice.file->string();
        text = read_bytes(*choice.file, "template", Template::kMaxSourceBytes);
        name = source;
    } else {
        if (!model) throw UsageError("a chat template needs --template FILE or --model MODEL");
        const std::string key = choice.name ? "tokenizer.chat_template." + *choice.name : "tokenizer.chat_template";
        const auto found = model->get_string(key);
        if (!found) {
            std::string have;
            for (const auto& e : model->metadata())
                if (e.key.rfind("tokenizer.chat_template", 0) == 0) have += (have.empty() ? "" : ", ") + std::string(e.key);
            throw Error(fmt::format("{}: no '{}' in the model (it has: {})", model_path, key, have.empty() ? "no chat template" : have));
        }
        text = std::string(*found);
        source = model_path + ":" + key;
        name = source;
    }
    return LoadedTemplate{Template::parse(name, text), source, sha256_hex(std::string_view(text))};
}

ChatPrompt render_prompt(const LoadedTemplate& t, json::object vars, const tokenizer::Tokenizer* vocabulary) {
    check_vars(vars, t.source);
    if (vocabulary) {
        const auto& info = vocabulary->info();
        const auto text_of = [&](std::optional<std::uint32_t> id) {
            return id ? std::string(vocabulary->token_text(static_cast<std::int32_t>(*id))) : std::string();
        };
        if (!vars.contains("bos_token")) vars["bos_token"] = text_of(info.bos_id);
        if (!vars.contains("eos_token")) vars["eos_token"] = text_of(info.eos_id);
    }
    ChatPrompt p;
    p.template_source = t.source;
    p.template_sha256 = t.sha256;
    p.thinking = thinking_markers(t.parsed.source());
    Text rendered = t.parsed.render(variables_from_json(vars));
    p.text = std::move(rendered.bytes);
    p.origins = std::move(rendered.origins);
    if (const auto* m = vars.if_contains("messages"))
        for (const auto& message : m->get_array()) p.roles.emplace_back(message.get_object().at("role").get_string());
    p.vars = std::move(vars);
    return p;
}

std::vector<tokenizer::Token> tokenize_prompt(ChatPrompt& prompt, const tokenizer::Tokenizer& tok) {
    const auto& info = tok.info();
    tokenizer::EncodeOptions options;
    options.parse_special = true;
    // What llama.cpp's encode would add: the model's add_bos, forced on for Gemma 4. Ask
    // the tokenizer rather than repeat its rule.
    if (info.bos_id) {
        const auto probe = tok.encode("", {});
        prompt.bos.vocabulary_adds = !probe.empty() && probe.front().id == static_cast<std::int32_t>(*info.bos_id);
        const std::string_view bos_text = tok.token_text(static_cast<std::int32_t>(*info.bos_id));
        prompt.bos.template_wrote = !bos_text.empty() && prompt.text.rfind(bos_text, 0) == 0;
    }
    prompt.bos.added = prompt.bos.vocabulary_adds && !prompt.bos.template_wrote;
    options.add_bos = prompt.bos.added;
    return tok.encode(prompt.text, options);
}

std::vector<std::int32_t> token_messages(const std::vector<tokenizer::Token>& tokens, const std::vector<Origin>& origins) {
    std::vector<std::int32_t> out;
    out.reserve(tokens.size());
    std::size_t o = 0;
    for (const auto& t : tokens) {
        while (o < origins.size() && origins[o].end <= t.start) ++o;
        // The message covering most of the token's bytes (a token can straddle the edge
        // of a message's text and the template's).
        std::int32_t best = -1;
        std::size_t best_bytes = 0;
        for (std::size_t k = o; k < origins.size() && origins[k].begin < t.end; ++k) {
            const std::size_t b = std::max<std::size_t>(origins[k].begin, t.start), e = std::min<std::size_t>(origins[k].end, t.end);
            if (e <= b) continue;
            if (e - b > best_bytes) best_bytes = e - b, best = origins[k].message;
        }
        const std::size_t length = t.end - t.start;
        out.push_back(best_bytes * 2 > length ? best : -1);
    }
    return out;
}

json::object prompt_record(const ChatPrompt& p) {
    json::object r;
    r["template_source"] = p.template_source;
    r["template_sha256"] = p.template_sha256;
    r["vars"] = p.vars;
    r["rendered"] = p.text;
    r["bos"] = {{"template_wrote", p.bos.template_wrote},
                {"vocabulary_adds", p.bos.vocabulary_adds},
                {"added", p.bos.added}};
    if (p.thinking)
        r["thinking_markers"] = {{"open", std::string(p.thinking->open)}, {"close", std::string(p.thinking->close)}};
    if (p.bos.template_wrote && p.bos.vocabulary_adds)
        r["bos_note"] = "the template writes BOS and the vocabulary asks for one: only the template's is kept";
    return r;
}

}  // namespace ember::chat
