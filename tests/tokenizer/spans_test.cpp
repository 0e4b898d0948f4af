// Rung: smoke (span and detokenization invariants). On Arabic, combining marks, emoji,
// byte-fallback tokens and invalid UTF-8, for the four fixture vocabularies: the spans tile
// the input; each token's piece is the input bytes of its span (SentencePiece adds its
// own space in front); joining the pieces restores the text; BOS/EOS and added spaces
// have empty spans; malformed bytes are handled the way llama.cpp handles them.
#include <doctest/doctest.h>

#include "tokenizer/unicode.hpp"
#include "tokenizer_fixtures.hpp"

using namespace ember;
using tokenizer::EncodeOptions;
using tokenizer::Token;
using tokenizer::TokenType;

namespace {

constexpr EncodeOptions kPlain{.add_special = false, .add_bos = {}, .parse_special = false};

const char* const kTexts[] = {
    "كتب الطالب الدرس في المكتبة",                       // Arabic
    "كَتَبَ الطَّالِبُ الدَّرْسَ",                           // Arabic with diacritics (combining marks)
    "cafe\u0301 nai\u0308ve A\u030A\u0301",             // Latin letters with combining marks
    "🦊 👩‍💻 🇸🇦 ❤️ 👍🏽",                                  // emoji: ZWJ, flags, variation selector, skin tone
    "The quick brown fox: 3 + 4 = 7, naïve café 🦊 كتب",
    "  a\n\n\tb   ",
    "x",
};

bool is_spm(const tokenizer::Tokenizer& tok) { return tok.info().type == tokenizer::VocabType::Spm; }

// `text` with the space SentencePiece puts in front of it, if `add`.
std::string spaced(bool add, std::string_view text) {
    std::string out(add ? 1 : 0, ' ');
    out.append(text);
    return out;
}

// Each token's piece is the input bytes of its span; in SentencePiece the first token may
// carry the added space in front of them.
void check_pieces_are_spans(const tokenizer::Tokenizer& tok, const std::vector<Token>& tokens, std::string_view text) {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        CAPTURE(i);
        const std::string piece = tok.piece(tokens[i].id);
        const std::string_view span = text.substr(tokens[i].start, tokens[i].end - tokens[i].start);
        if (i == 0 && is_spm(tok)) {
            CHECK(piece == spaced(true, span));
        } else {
            CHECK(piece == span);
        }
    }
}

std::string joined(const tokenizer::Tokenizer& tok, const std::vector<Token>& tokens) {
    return tok.decode(test::ids_of(tokens));
}

}  // namespace

TEST_CASE("spans: tile the input and match the pieces (Arabic, combining marks, emoji)") {
    for (const auto& vocab : test::kVectorVocabs) {
        const std::string name = vocab.name;
        CAPTURE(name);
        const auto& tok = test::fixture_tokenizer(vocab.model_path);
        for (const char* text : kTexts) {
            CAPTURE(text);
            const auto tokens = tok.encode(text, kPlain);
            test::check_spans_tile(tokens, text);
            check_pieces_are_spans(tok, tokens, text);
            CHECK(joined(tok, tokens) == spaced(is_spm(tok), text));
        }
    }
}

TEST_CASE("spans: BOS, EOS and the space SentencePiece adds have empty spans at their position") {
    for (const auto& vocab : test::kVectorVocabs) {
        const std::string name = vocab.name;
        CAPTURE(name);
        const auto& tok = test::fixture_tokenizer(vocab.model_path);
        const auto tokens = tok.encode("كتب", {.add_special = true, .add_bos = true, .parse_special = false});
        REQUIRE(tokens.size() >= 2);
        CHECK(tokens[0].id == static_cast<std::int32_t>(*tok.info().bos_id));
        CHECK((tokens[0].start == 0 && tokens[0].end == 0));
        test::check_spans_tile(tokens, "كتب");
    }

    // "\n" in SentencePiece: the added "▁" is a token of its own, covering no input byte.
    const auto& spm = test::fixture_tokenizer("tokenizer/ggml-vocab-llama-spm.gguf");
    const auto tokens = spm.encode("\n", kPlain);
    REQUIRE(tokens.size() == 2);
    CHECK(spm.piece(tokens[0].id) == " ");
    CHECK((tokens[0].start == 0 && tokens[0].end == 0));
    CHECK(spm.token_type(tokens[1].id) == TokenType::Byte);
    CHECK((tokens[1].start == 0 && tokens[1].end == 1));

    // Special tokens parsed out of the text span their text; the space SentencePiece adds
    // after them joins the next word.
    const std::string text = "Hello</s>world";
    const auto parsed = spm.encode(text, {.add_special = true, .add_bos = {}, .parse_special = true});
    REQUIRE(parsed.size() == 4);
    CHECK(parsed[2].id == 2);
    CHECK((parsed[2].start == 5 && parsed[2].end == 9));
    CHECK(spm.piece(parsed[3].id) == " world");
    CHECK((parsed[3].start == 9 && parsed[3].end == 14));
}

TEST_CASE("spans: byte-fallback tokens cover exactly their byte") {
    // Llama 2 has no token for the fox emoji, Gemma 4 none for a Garay letter (U+10D40):
    // both spell them with <0xXX> byte tokens.
    const std::pair<const char*, const char*> cases[] = {
        {"tokenizer/ggml-vocab-llama-spm.gguf", "fox 🦊!"},
        {"models/synth-gemma4-q8_0.gguf", "x \xF0\x90\xB5\x80 y"},
    };
    for (const auto& entry : cases) {
        const char* const model = entry.first;  // not structured bindings: clang 14 cannot capture those (CAPTURE)
        const std::string text = entry.second;
        CAPTURE(model);
        const auto& tok = test::fixture_tokenizer(model);
        const auto tokens = tok.encode(text, kPlain);
        test::check_spans_tile(tokens, text);
        std::size_t byte_tokens = 0;
        for (const auto& t : tokens) {
            if (tok.token_type(t.id) != TokenType::Byte) continue;
            ++byte_tokens;
            CHECK(t.end - t.start == 1);
            CHECK(tok.piece(t.id) == text.substr(t.start, 1));
            CHECK(!tokenizer::unicode::is_valid_utf8(tok.piece(t.id)));  // a lone part of a character
        }
        CHECK(byte_tokens == 4);
        CHECK(tok.decode(test::ids_of(tokens)) == spaced(is_spm(tok), text));
    }

    // Byte-level BPE: a character may be split over tokens whose pieces are partial UTF-8.
    const auto& llama3 = test::fixture_tokenizer("models/synth-llama3-q8_0.gguf");
    const std::string fox = "a 🦊";
    const auto tokens = llama3.encode(fox, kPlain);
    test::check_spans_tile(tokens, fox);
    check_pieces_are_spans(llama3, tokens, fox);
    CHECK(tokens.size() > 2);
}

TEST_CASE("spans: invalid UTF-8 never crashes, spans still tile the original bytes") {
    // Each input with what llama.cpp makes of it.
    // BPE (gpt2, gemma4) decodes to code points first: each byte that does not start a
    // well-formed sequence becomes U+FFFD; overlong forms and surrogates decode without
    // complaint (C0 80 -> U+0000). F4 90 80 80 (above U+10FFFF) makes llama.cpp throw;
    // Ember turns each of its bytes into U+FFFD.
    // SentencePiece never decodes: it replaces spaces by "▁" (E2 96 81), cuts characters by
    // their lead byte alone and spells unknown ones with byte tokens, so the bytes come back
    // unchanged, except that a truncated sequence swallows the first bytes of a following
    // "▁", which then come back as raw bytes instead of a space.
    struct Case {
        std::string raw;
        std::string bpe_cleaned;
        std::string spm_joined;
    };
    const Case cases[] = {
        {"a\xFF" "b", "a\uFFFD" "b", " a\xFF" "b"},
        {"\x80", "\uFFFD", " \x80"},
        {"x\xD8", "x\uFFFD", " x\xD8"},
        {"\xE2\x82 y", "\uFFFD\uFFFD y", " \xE2\x82\xE2\x96\x81y"},
        {std::string("q\xC0\x80q"), std::string("q\0q", 3), " q\xC0\x80q"},
        {"\xED\xA0\x80!", "\xED\xA0\x80!", " \xED\xA0\x80!"},
        {"\xF4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD", " \xF4\x90\x80\x80"},
        {"ok \xF0\x9F\xA6 done", "ok \uFFFD\uFFFD\uFFFD done", " ok \xF0\x9F\xA6\xE2\x96\x81" "done"},
        {"كتب\xD9 الطالب", "كتب\uFFFD الطالب", " كتب\xD9\xE2\x96\x81الطالب"},
    };
    for (const auto& vocab : test::kVectorVocabs) {
        const std::string name = vocab.name;
        CAPTURE(name);
        const auto& tok = test::fixture_tokenizer(vocab.model_path);
        for (const auto& c : cases) {
            CAPTURE(c.raw);
            const auto tokens = tok.encode(c.raw, kPlain);
            test::check_spans_tile(tokens, c.raw);
            if (is_spm(tok)) {
                CHECK(joined(tok, tokens) == c.spm_joined);
            } else {
                CHECK(test::ids_of(tokens) == tok.encode_ids(c.bpe_cleaned, kPlain));
                CHECK(joined(tok, tokens) == c.bpe_cleaned);
            }
        }
    }

    // Where a replaced byte is its own token, that token spans exactly the bad byte.
    const auto& gemma = test::fixture_tokenizer("models/synth-gemma4-q8_0.gguf");
    const std::string raw = "\n\xFF\n";
    const auto tokens = gemma.encode(raw, kPlain);
    test::check_spans_tile(tokens, raw);
    REQUIRE(tokens.size() == 3);
    CHECK(gemma.piece(tokens[1].id) == "\uFFFD");
    CHECK((tokens[1].start == 1 && tokens[1].end == 2));
}
