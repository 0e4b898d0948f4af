#include "extract/manifest.hpp"

#include "chat/chat_prompt.hpp"
#include "extract/extraction.hpp"

#include <fmt/format.h>

#include <boost/json/value_from.hpp>

#include <map>

#include "common/sha256.hpp"
#include "tokenizer/unicode.hpp"

namespace ember::extract {
namespace {

namespace json = boost::json;

json::value optional_id(const std::optional<std::uint32_t>& id) { return id ? json::value(*id) : json::value(nullptr); }

// What the columns of a stage's rows are (ember/stages.h).
std::string column_meaning(hooks::Stage stage) { return hooks::stage_info(stage).meaning; }

}  // namespace

std::string hex(std::string_view bytes) {
    std::string out;
    for (const char c : bytes) fmt::format_to(std::back_inserter(out), "{:02x}", static_cast<unsigned char>(c));
    return out;
}

json::value piece_text(std::string_view piece) {
    return tokenizer::unicode::is_valid_utf8(piece) ? json::value(piece) : json::value(nullptr);
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

json::array layer_records(const models::ModelConfig& c) {
    json::array layers;
    for (std::uint32_t l = 0; l < c.n_layers; ++l) {
        const auto& L = c.layers[l];
        layers.push_back({{"index", l},
                          {"attention", L.sliding_window ? "sliding_window" : "full"},
                          {"n_head", L.n_head},
                          {"n_head_kv", L.n_head_kv},
                          {"head_dim", L.head_dim},
                          {"n_rot", L.n_rot},
                          {"n_ff", L.n_ff},
                          {"rope_base", L.rope_base},
                          {"rope_freq_scale", L.rope_freq_scale},
                          {"uses_rope_freqs", L.uses_rope_freqs},
                          {"attention_scale", L.attention_scale},
                          {"kv_source", L.kv_source}});
    }
    return layers;
}

json::object weight_type_record(const gguf::File& file) {
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> histogram;  // type -> (tensors, bytes)
    for (const auto& t : file.tensors()) {
        auto& h = histogram[std::string(gguf::type_name(t.type))];
        h.first += 1;
        h.second += t.nbytes;
    }
    json::object types;
    for (const auto& [name, h] : histogram) types[name] = {{"tensors", h.first}, {"bytes", h.second}};
    return types;
}

json::object model_record(const std::filesystem::path& path, const gguf::File& file, const models::ModelConfig& c,
                          const std::string& sha256) {
    return {
        {"path", std::filesystem::absolute(path).lexically_normal().string()},
        {"size", file.file_size()},
        {"sha256", sha256},
        {"name", c.name},
        {"family", models::family_name(c.family)},
        {"architecture", c.architecture},
        {"dims",
         {{"n_layers", c.n_layers},
          {"n_embd", c.n_embd},
          {"n_vocab", c.n_vocab},
          {"n_ctx_train", c.n_ctx_train},
          {"n_embd_per_layer", c.n_embd_per_layer},
          {"layers", layer_records(c)}}},
        {"weight_types", weight_type_record(file)},
    };
}

json::object tokenizer_record(const tokenizer::Tokenizer& tok, const EncodedPrompt& prompt) {
    const auto& info = tok.info();
    json::array tokens;
    for (const auto& t : prompt.tokens) {
        const std::string piece = tok.piece(t.id, true);
        tokens.push_back({{"id", t.id},
                          {"start", t.start},
                          {"end", t.end},
                          {"piece_hex", hex(piece)},
                          {"piece", piece_text(piece)}});
    }
    return {
        {"model", info.model},
        {"pre", info.pre},
        {"vocab_size", tok.vocab_size()},
        {"bos_id", optional_id(info.bos_id)},
        {"eos_id", optional_id(info.eos_id)},
        {"add_bos", info.add_bos},
        {"bos_added", prompt.bos_added},
        {"prompt_bytes", prompt.text.size()},
        {"prompt_sha256", sha256_hex(prompt.text)},
        {"token_ids", json::value_from(prompt.ids)},
        {"tokens", std::move(tokens)},
    };
}

json::object sample_record(const EncodedPrompt& prompt) {
    Sha256 ids;
    ids.update(std::as_bytes(std::span(prompt.ids)));
    json::object r{{"index", 0},
                   {"n_tokens", prompt.ids.size()},
                   {"prompt_sha256", sha256_hex(prompt.text)},
                   {"token_ids_sha256", ids.finish_hex()}};
    if (prompt.chat) {
        r["chat"] = *prompt.chat;
        r["token_messages"] = token_messages_json(prompt);
    }
    return r;
}

std::string values_sha256(const std::vector<float>& values) { return sha256_hex(std::as_bytes(std::span(values))); }

std::string capture_file_name(const Capture& c) {
    std::string name(hooks::stage_name(c.stage));
    if (c.layer) name += fmt::format(".layer{}", *c.layer);
    return name + ".npy";
}

json::object tensor_entry(const Capture& c, const FileRecord& file) {
    json::object entry{
        {"file", file.name},
        {"stage", hooks::stage_name(c.stage)},
        {"layer", c.layer ? json::value(*c.layer) : json::value(nullptr)},
        {"phase", "prefill"},
        {"positions", json::value_from(c.positions)},
        {"shape", json::value_from(c.shape())},
        {"dtype", "float32"},
        {"rows", c.stage == hooks::Stage::AttentionPattern
                     ? "prompt positions, in the order of 'positions': [i, h] is head h of positions[i]"
                     : "prompt positions, in the order of 'positions'"},
        {"columns", c.stage == hooks::Stage::AttentionPattern
                        ? "prompt positions 0 .. n_tokens - 1: the post-softmax weight of each (0 where masked)"
                        : column_meaning(c.stage)},
        {"values_sha256", values_sha256(c.values)},
    };
    if (c.stage == hooks::Stage::AttentionPattern) entry["layout"] = "[positions, n_head, n_kv]";
    return entry;
}

}  // namespace ember::extract
