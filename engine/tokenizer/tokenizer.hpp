// The tokenizer of a GGUF model, reproducing llama.cpp's token ids exactly
// (model-math §8; docs/tokenizer.md), with each token's byte span in the input.
//
//   const auto tok = tokenizer::Tokenizer::from_gguf(file);
//   for (const tokenizer::Token& t : tok.encode("كتب الطالب")) ... t.id, bytes [t.start, t.end)
//
// A Tokenizer owns copies of everything it needs (it may outlive the gguf::File), is
// immutable after loading, cheap to copy (shared state) and safe to use from many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "tokenizer/token.hpp"
#include "tokenizer/tokenizer_info.hpp"

namespace ember::tokenizer {

struct EncodeOptions {
    bool add_special = true;       // BOS/EOS per the model's add_bos/add_eos
    std::optional<bool> add_bos;   // overrides the model's add_bos when set (--no-bos, add_bos=false)
    bool parse_special = false;    // split special/control token texts out of the input
};

class Tokenizer {
public:
    // Loads and validates the vocabulary (and merges). Throws ember::Error naming the file
    // and key on anything malformed or unsupported (an unknown model or pre-tokenizer).
    static Tokenizer from_gguf(const gguf::File& file);

    // The tokens of `text` (any bytes; malformed UTF-8 is handled as llama.cpp does) with
    // byte spans that tile it. Throws ember::Error when BOS/EOS is requested but the
    // model has none, or a byte needs a byte-fallback token the vocabulary lacks.
    std::vector<Token> encode(std::string_view text, const EncodeOptions& options = {}) const;
    std::vector<std::int32_t> encode_ids(std::string_view text, const EncodeOptions& options = {}) const;

    // The bytes a token detokenizes to (possibly part of a UTF-8 character). CONTROL and
    // UNKNOWN tokens give "" unless `special`, then their text. Throws on an unknown id.
    std::string piece(std::int32_t id, bool special = false) const;
    // The pieces joined, special tokens left out; no clean-up of spaces.
    std::string decode(std::span<const std::int32_t> ids) const;
    std::string_view token_text(std::int32_t id) const;  // raw vocabulary string
    TokenType token_type(std::int32_t id) const;          // after llama.cpp's load-time fixes

    bool is_end_of_generation(std::int32_t id) const;
    std::span<const std::int32_t> end_of_generation_ids() const;  // ascending
    std::size_t vocab_size() const;
    const TokenizerInfo& info() const;  // model, pre, bos/eos, add_bos...

private:
    struct State;
    explicit Tokenizer(std::shared_ptr<const State> state) : state_(std::move(state)) {}
    void check_id(std::int32_t id) const;
    std::shared_ptr<const State> state_;
};

}  // namespace ember::tokenizer
