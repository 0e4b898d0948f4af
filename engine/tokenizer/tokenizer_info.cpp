#include "tokenizer/tokenizer_info.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <span>

#include "common/error.hpp"

namespace ember::tokenizer {
namespace {

// tokenizer.ggml.pre names and the pre-tokenizer llama.cpp selects for them (model-math §8.5).
constexpr std::array<std::string_view, 9> kLlama3Pres = {"llama-bpe", "llama3", "llama-v3", "falcon3",     "falcon-h1",
                                                         "pixtral",   "midm-2.0", "lfm2",   "jina-v5-nano"};
constexpr std::array<std::string_view, 5> kQwen2Pres = {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez"};

bool one_of(std::string_view value, std::span<const std::string_view> names) {
    return std::find(names.begin(), names.end(), value) != names.end();
}

constexpr std::uint32_t kNoToken = 0xFFFFFFFFu;

}  // namespace

std::string_view vocab_type_name(VocabType type) {
    switch (type) {
        case VocabType::Spm: return "spm";
        case VocabType::Bpe: return "bpe";
        case VocabType::Gemma4: return "gemma4";
        case VocabType::Unsupported: return "unsupported";
    }
    return "?";
}

std::string_view pre_tokenizer_name(PreTokenizer pre) {
    switch (pre) {
        case PreTokenizer::None: return "none";
        case PreTokenizer::Llama3: return "llama3";
        case PreTokenizer::Qwen2: return "qwen2";
        case PreTokenizer::Newlines: return "newlines";
        case PreTokenizer::Unsupported: return "unsupported";
    }
    return "?";
}

std::string supported_bpe_pre_names() {
    std::string names;
    for (auto n : kLlama3Pres) names += fmt::format("{}{}", names.empty() ? "" : ", ", n);
    for (auto n : kQwen2Pres) names += fmt::format(", {}", n);
    return names;
}

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
        info.type = VocabType::Spm;
        info.bos_id = 1;
        info.eos_id = 2;
        info.unk_id = 0;
        info.add_bos = true;
        info.add_space_prefix = true;
    } else if (info.model == "gpt2") {
        info.type = VocabType::Bpe;
        info.bos_id = 11;
        info.eos_id = 11;
        info.clean_spaces = true;
        if (one_of(info.pre, kLlama3Pres)) {
            info.pre_tokenizer = PreTokenizer::Llama3;
            info.ignore_merges = true;
            info.add_bos = true;
        } else if (one_of(info.pre, kQwen2Pres)) {
            info.pre_tokenizer = PreTokenizer::Qwen2;
            info.clean_spaces = false;
        } else {
            info.pre_tokenizer = PreTokenizer::Unsupported;  // Tokenizer::from_gguf refuses it by name
            info.add_bos = info.pre == "tekken" || info.pre == "chameleon";  // llama.cpp's default, for inspect
        }
    } else if (info.model == "gemma4") {
        info.type = VocabType::Gemma4;
        info.pre_tokenizer = PreTokenizer::Newlines;  // llama.cpp ignores the file's pre here
        info.clean_spaces = true;
    }

    auto special_id = [&](const char* key, std::optional<std::uint32_t>& slot) {
        const auto id = file.get_u32(key);
        if (!id || *id == kNoToken) return;
        if (*id >= info.vocab_size) {
            throw Error(file.describe_error(file.find(key)->value.offset,
                                            fmt::format("'{}' = {} is outside the vocabulary of {} tokens", key, *id,
                                                        info.vocab_size)));
        }
        slot = *id;
    };
    special_id("tokenizer.ggml.bos_token_id", info.bos_id);
    special_id("tokenizer.ggml.eos_token_id", info.eos_id);
    special_id("tokenizer.ggml.eot_token_id", info.eot_id);
    special_id("tokenizer.ggml.eom_token_id", info.eom_id);
    special_id("tokenizer.ggml.unknown_token_id", info.unk_id);
    special_id("tokenizer.ggml.seperator_token_id", info.sep_id);  // sic: the key is misspelled in GGUF
    special_id("tokenizer.ggml.padding_token_id", info.pad_id);
    special_id("tokenizer.ggml.mask_token_id", info.mask_id);
    special_id("tokenizer.ggml.fim_pad_token_id", info.fim_pad_id);
    special_id("tokenizer.ggml.fim_rep_token_id", info.fim_rep_id);
    special_id("tokenizer.ggml.fim_sep_token_id", info.fim_sep_id);
    std::optional<std::uint32_t> unused;
    for (const char* key : {"tokenizer.ggml.cls_token_id", "tokenizer.ggml.fim_pre_token_id",
                            "tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.fim_mid_token_id"}) {
        special_id(key, unused);  // validated only
    }
    if (const auto v = file.get_bool("tokenizer.ggml.add_bos_token")) info.add_bos = *v;
    if (const auto v = file.get_bool("tokenizer.ggml.add_eos_token")) info.add_eos = *v;
    if (const auto v = file.get_bool("tokenizer.ggml.add_space_prefix")) info.add_space_prefix = *v;
    if (info.type == VocabType::Gemma4) info.add_bos = true;  // llama.cpp forces BOS for Gemma 4
    return info;
}

}  // namespace ember::tokenizer
