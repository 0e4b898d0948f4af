#include "tokenizer/tokenizer_info.hpp"

#include <fmt/format.h>

#include "common/error.hpp"

namespace ember::tokenizer {

TokenizerInfo read_tokenizer_info(const gguf::File& file) {
    TokenizerInfo info;
    const auto model = file.get_string("tokenizer.ggml.model");
    if (!model) throw Error(fmt::format("{}: required metadata key 'tokenizer.ggml.model' is missing", file.source()));
    info.model = std::string(*model);
    info.pre = std::string(file.get_string("tokenizer.ggml.pre").value_or(""));
    const auto* tokens = file.find("tokenizer.ggml.tokens");
    if (!tokens) throw Error(fmt::format("{}: required metadata key 'tokenizer.ggml.tokens' is missing", file.source()));
    if (tokens->value.type != gguf::ValueType::ARRAY || tokens->value.element_type != gguf::ValueType::STRING) {
        file.get_string_array("tokenizer.ggml.tokens");  // throws the typed error
    }
    info.vocab_size = tokens->value.count;

    // Per-model defaults (model-math §8.2), then the file's overrides.
    if (info.model == "llama") {
        info.bos_id = 1;
        info.eos_id = 2;
        info.add_bos = true;
    } else if (info.model == "gpt2") {
        info.bos_id = 11;
        info.eos_id = 11;
        info.add_bos = info.pre == "llama-bpe" || info.pre == "llama3" || info.pre == "llama-v3" ||
                       info.pre == "tekken" || info.pre == "chameleon";
    } else if (info.model == "gemma4") {
        info.add_bos = true;
    }
    auto special_id = [&](const char* key, std::optional<std::uint32_t>& slot) {
        if (const auto id = file.get_u32(key)) {
            if (*id == 0xFFFFFFFFu) {  // what converters write for "no such token"
                slot.reset();
                return;
            }
            if (*id >= info.vocab_size) {
                throw Error(file.describe_error(file.find(key)->value.offset,
                                                fmt::format("'{}' = {} is outside the vocabulary of {} tokens", key, *id,
                                                            info.vocab_size)));
            }
            slot = *id;
        }
    };
    special_id("tokenizer.ggml.bos_token_id", info.bos_id);
    special_id("tokenizer.ggml.eos_token_id", info.eos_id);
    if (const auto v = file.get_bool("tokenizer.ggml.add_bos_token")) info.add_bos = *v;
    if (const auto v = file.get_bool("tokenizer.ggml.add_eos_token")) info.add_eos = *v;
    if (info.model == "gemma4") info.add_bos = true;  // llama.cpp forces BOS for Gemma 4
    return info;
}

}  // namespace ember::tokenizer
