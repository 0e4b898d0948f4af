#include "tokenizer/tokenizer.hpp"

#include <fmt/format.h>

#include "common/error.hpp"
#include "tokenizer/bpe.hpp"
#include "tokenizer/byte_encoding.hpp"
#include "tokenizer/special_split.hpp"
#include "tokenizer/spm.hpp"
#include "tokenizer/unicode.hpp"
#include "tokenizer/vocab.hpp"

namespace ember::tokenizer {

struct Tokenizer::State {
    TokenizerInfo info;
    Vocabulary vocab;
    std::optional<BpeModel> bpe;  // gpt2 and gemma4
    std::optional<SpmModel> spm;  // llama
    SpecialTokenSplitter splitter;
};

namespace {

// Inputs are indexed with 32-bit offsets inside the algorithms.
constexpr std::size_t kMaxInputBytes = std::size_t{1} << 30;

void check_supported(const gguf::File& file, const TokenizerInfo& info) {
    if (info.type == VocabType::Unsupported) {
        throw Error(fmt::format("{}: tokenizer.ggml.model '{}' is not supported (Ember tokenizes 'llama', 'gpt2' and 'gemma4')",
                                file.source(), info.model));
    }
    if (info.type == VocabType::Bpe && info.pre_tokenizer == PreTokenizer::Unsupported) {
        const std::string what = info.pre.empty() ? std::string("is missing")
                                                  : fmt::format("'{}' is not a pre-tokenizer Ember implements", info.pre);
        throw Error(fmt::format("{}: tokenizer.ggml.pre {} (supported for gpt2 vocabularies: {})", file.source(), what,
                                supported_bpe_pre_names()));
    }
}

// NORMAL token text of a SentencePiece-style vocabulary: '▁' stands for a space.
std::string unescape_spaces(std::string_view text) {
    static constexpr std::string_view kSpaceMark = "\xE2\x96\x81";
    std::string out;
    out.reserve(text.size());
    std::size_t pos = 0;
    while (pos < text.size()) {
        const std::size_t mark = text.find(kSpaceMark, pos);
        if (mark == std::string_view::npos) {
            out.append(text.substr(pos));
            break;
        }
        out.append(text.substr(pos, mark - pos)).push_back(' ');
        pos = mark + kSpaceMark.size();
    }
    return out;
}

// NORMAL token text of a byte-level vocabulary: each character back to the byte it spells.
// A character that spells no byte is written as "[UNK_BYTE_0x<its UTF-8 in hex>]" followed
// by the token text, as llama.cpp writes it.
std::string decode_byte_level(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t pos = 0; pos < text.size();) {
        const auto d = unicode::decode(text, pos);
        const int byte = byte_encoding::byte_of(d.cp);
        if (byte >= 0) {
            out.push_back(static_cast<char>(byte));
        } else {
            out += "[UNK_BYTE_0x";
            std::string utf8;
            unicode::append_utf8(utf8, d.cp);
            for (const char c : utf8) out += fmt::format("{:02x}", static_cast<unsigned char>(c));
            out.append(text).push_back(']');
        }
        pos += d.length;
    }
    return out;
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const gguf::File& file) {
    TokenizerInfo info = read_tokenizer_info(file);
    check_supported(file, info);
    Vocabulary vocab = Vocabulary::load(file, info);
    std::optional<BpeModel> bpe;
    std::optional<SpmModel> spm;
    if (info.type == VocabType::Spm) {
        spm = SpmModel::load(vocab);
    } else {
        bpe = BpeModel::load(file, vocab, info);
    }
    SpecialTokenSplitter splitter(vocab);
    return Tokenizer(std::make_shared<const State>(
        State{std::move(info), std::move(vocab), std::move(bpe), std::move(spm), std::move(splitter)}));
}

std::vector<Token> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
    const State& s = *state_;
    if (text.size() >= kMaxInputBytes) {
        throw Error(fmt::format("input of {} bytes is too large to tokenize at once (limit {} bytes)", text.size(),
                                kMaxInputBytes - 1));
    }
    std::vector<Token> out;
    out.reserve(text.size() / 3 + 4);

    const bool add_bos = options.add_special && options.add_bos.value_or(s.info.add_bos);
    if (add_bos) {
        if (!s.info.bos_id) throw Error("the model asks for a BOS token but names none (tokenizer.ggml.bos_token_id)");
        out.push_back({static_cast<std::int32_t>(*s.info.bos_id), 0, 0});
    }

    // SentencePiece puts a space before the text and before the text after each special token.
    bool after_special = true;
    for (const Fragment& f : s.splitter.split(s.vocab, text, options.parse_special)) {
        if (f.token != Vocabulary::kNone) {
            out.push_back({f.token, f.start, f.end});
            after_special = true;
            continue;
        }
        if (s.bpe) {
            s.bpe->encode(s.vocab, text, f.start, f.end, out);
        } else {
            s.spm->encode(s.vocab, text, f.start, f.end, s.info.add_space_prefix && after_special, out);
        }
        after_special = false;
    }

    if (options.add_special && s.info.add_eos) {
        if (!s.info.eos_id) throw Error("the model asks for an EOS token but names none (tokenizer.ggml.eos_token_id)");
        out.push_back({static_cast<std::int32_t>(*s.info.eos_id), text.size(), text.size()});
    }
    return out;
}

std::vector<std::int32_t> Tokenizer::encode_ids(std::string_view text, const EncodeOptions& options) const {
    std::vector<std::int32_t> ids;
    for (const Token& t : encode(text, options)) ids.push_back(t.id);
    return ids;
}

void Tokenizer::check_id(std::int32_t id) const {
    if (!state_->vocab.contains(id)) {
        throw Error(fmt::format("token id {} is outside the vocabulary of {} tokens", id, state_->vocab.size()));
    }
}

std::string Tokenizer::piece(std::int32_t id, bool special) const {
    check_id(id);
    const State& s = *state_;
    const std::string_view text = s.vocab.text(id);
    const bool byte_level = s.info.type == VocabType::Bpe;
    switch (s.vocab.type(id)) {
        case TokenType::Control:
        case TokenType::Unknown: return special ? std::string(text) : std::string();
        case TokenType::UserDefined: return std::string(text);
        case TokenType::Normal: return byte_level ? decode_byte_level(text) : unescape_spaces(text);
        case TokenType::Byte: return byte_level ? std::string() : std::string(1, static_cast<char>(s.vocab.byte_value(id)));
        case TokenType::Unused:
        case TokenType::Undefined: return {};
    }
    return {};
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
    std::string out;
    for (const std::int32_t id : ids) out += piece(id, false);
    return out;
}

std::string_view Tokenizer::token_text(std::int32_t id) const {
    check_id(id);
    return state_->vocab.text(id);
}

TokenType Tokenizer::token_type(std::int32_t id) const {
    check_id(id);
    return state_->vocab.type(id);
}

bool Tokenizer::is_end_of_generation(std::int32_t id) const { return state_->vocab.is_end_of_generation(id); }

std::span<const std::int32_t> Tokenizer::end_of_generation_ids() const { return state_->vocab.end_of_generation(); }

std::size_t Tokenizer::vocab_size() const { return state_->vocab.size(); }

const TokenizerInfo& Tokenizer::info() const { return state_->info; }

}  // namespace ember::tokenizer
