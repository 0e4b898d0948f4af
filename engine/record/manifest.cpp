#include "record/manifest.hpp"

#include <fmt/format.h>

#include <boost/json/value_from.hpp>

#include <map>

#include "common/sha256_file.hpp"
#include "runtime/prompt.hpp"
#include "tokenizer/unicode.hpp"

namespace ember::record {
namespace {

namespace json = boost::json;

json::value optional_id(const std::optional<std::uint32_t>& id) { return id ? json::value(*id) : json::value(nullptr); }

}  // namespace

std::string hex(std::string_view bytes) {
    std::string out;
    for (const char c : bytes) fmt::format_to(std::back_inserter(out), "{:02x}", static_cast<unsigned char>(c));
    return out;
}

json::value piece_text(std::string_view piece) {
    return tokenizer::unicode::is_valid_utf8(piece) ? json::value(piece) : json::value(nullptr);
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

json::object tokenizer_record(const tokenizer::Tokenizer& tok, const runtime::EncodedPrompt& prompt) {
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

json::object sample_record(const runtime::EncodedPrompt& prompt) {
    Sha256 ids;
    ids.update(std::as_bytes(std::span(prompt.ids)));
    json::object r{{"index", 0},
                   {"n_tokens", prompt.ids.size()},
                   {"prompt_sha256", sha256_hex(prompt.text)},
                   {"token_ids_sha256", ids.finish_hex()}};
    if (prompt.chat) {
        r["chat"] = *prompt.chat;
        r["token_messages"] = runtime::token_messages_json(prompt);
    }
    return r;
}

std::string values_sha256(const std::vector<float>& values) { return sha256_hex(std::as_bytes(std::span(values))); }

}  // namespace ember::record
