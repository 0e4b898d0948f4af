// Rung: smoke (input validation). Vocabularies that are malformed in one precise way are
// refused when loaded, with an error naming the file, the key and the offending token;
// what llama.cpp tolerates (an empty token, -1 for "no token") still loads.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "common/error.hpp"
#include "gguf_builder.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace ember;
using test::GgufBuilder;
using tokenizer::Tokenizer;

namespace {

// A small SentencePiece vocabulary: <unk> <s> </s>, the 256 byte tokens, then a few pieces.
struct MiniSpm {
    std::vector<std::string> tokens;
    std::vector<std::int32_t> types;
    std::vector<float> scores;

    MiniSpm() {
        add("<unk>", 2);
        add("<s>", 3);
        add("</s>", 3);
        for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 6);
        for (const char* piece : {"\xE2\x96\x81", "a", "b", "c", "ab", "\xE2\x96\x81" "a", "\xE2\x96\x81" "ab"}) add(piece, 1);
    }
    void add(std::string text, std::int32_t type) {
        scores.push_back(-static_cast<float>(tokens.size()));
        tokens.push_back(std::move(text));
        types.push_back(type);
    }
    std::int32_t id(std::string_view text) const {
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            if (tokens[i] == text) return static_cast<std::int32_t>(i);
        }
        FAIL("no token " << text);
        return -1;
    }
    GgufBuilder builder() const {
        GgufBuilder b;
        b.string("tokenizer.ggml.model", "llama")
            .strings("tokenizer.ggml.tokens", tokens)
            .i32s("tokenizer.ggml.token_type", types)
            .f32s("tokenizer.ggml.scores", scores);
        return b;
    }
};

// A byte-level BPE vocabulary: the 256 GPT-2 byte characters plus one merge "a b".
std::vector<std::string> byte_level_tokens() {
    std::vector<std::string> tokens;
    char32_t next = 0x100;
    for (unsigned b = 0; b < 256; ++b) {
        const bool itself = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        const char32_t cp = itself ? b : next++;
        std::string s;
        if (cp < 0x80) {
            s.push_back(static_cast<char>(cp));
        } else {
            s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
            s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        }
        tokens.push_back(s);
    }
    tokens.push_back("ab");
    return tokens;
}

std::string load_error(const gguf::File& file) {
    try {
        Tokenizer::from_gguf(file);
    } catch (const Error& e) {
        return e.what();
    }
    return "(loaded without error)";
}

void check_mentions(const std::string& message, std::initializer_list<const char*> parts) {
    CAPTURE(message);
    for (const char* part : parts) CHECK_MESSAGE(message.find(part) != std::string::npos, part);
}

}  // namespace

TEST_CASE("vocab validation: the well-formed mini vocabularies load and tokenize") {
    const MiniSpm spm;
    const auto tok = Tokenizer::from_gguf(spm.builder().build());
    CHECK(tok.vocab_size() == spm.tokens.size());
    CHECK(tok.encode_ids("ab") == std::vector<std::int32_t>{1, spm.id("\xE2\x96\x81" "ab")});

    const auto bpe = Tokenizer::from_gguf(GgufBuilder()
                                              .string("tokenizer.ggml.model", "gpt2")
                                              .string("tokenizer.ggml.pre", "qwen2")
                                              .strings("tokenizer.ggml.tokens", byte_level_tokens())
                                              .strings("tokenizer.ggml.merges", {"a b"})
                                              .build());
    CHECK(bpe.encode_ids("ab") == std::vector<std::int32_t>{256});
}

TEST_CASE("vocab validation: malformed byte tokens are refused by name") {
    for (const char* bad : {"<0x-1>", "<0xZZ>", "<0x1>", "<0x100>", "0x41"}) {
        MiniSpm spm;
        spm.tokens[3 + 0x41] = bad;  // a BYTE-type token with a text that is not <0xHH>
        check_mentions(load_error(spm.builder().build()), {"test-vocab.gguf", "tokenizer.ggml.tokens", "BYTE", bad});
    }
}

TEST_CASE("vocab validation: special-token ids outside the vocabulary are refused, -1 means none") {
    for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id",
                            "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.eot_token_id"}) {
        CAPTURE(key);
        check_mentions(load_error(MiniSpm().builder().u32(key, 100000).build()), {key, "100000", "outside the vocabulary"});
    }
    const auto tok = Tokenizer::from_gguf(
        MiniSpm().builder().u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu).u32("tokenizer.ggml.bos_token_id", 0xFFFFFFFFu).build());
    CHECK(tok.info().bos_id == 1u);  // llama.cpp's default stays
    CHECK(!tok.info().pad_id);
}

TEST_CASE("vocab validation: arrays of the wrong element type or length are refused by key") {
    const MiniSpm spm;
    std::vector<std::uint32_t> ids(spm.tokens.size(), 1);
    check_mentions(load_error(GgufBuilder().string("tokenizer.ggml.model", "llama").u32s("tokenizer.ggml.tokens", ids).build()),
                   {"tokenizer.ggml.tokens", "ARRAY of UINT32", "ARRAY of STRING"});

    check_mentions(load_error(GgufBuilder()
                                  .string("tokenizer.ggml.model", "llama")
                                  .strings("tokenizer.ggml.tokens", spm.tokens)
                                  .strings("tokenizer.ggml.token_type", spm.tokens)
                                  .build()),
                   {"tokenizer.ggml.token_type", "ARRAY of STRING"});

    auto short_types = spm.types;
    short_types.pop_back();
    check_mentions(load_error(GgufBuilder()
                                  .string("tokenizer.ggml.model", "llama")
                                  .strings("tokenizer.ggml.tokens", spm.tokens)
                                  .i32s("tokenizer.ggml.token_type", short_types)
                                  .build()),
                   {"tokenizer.ggml.token_type", "has 265 entries", "266"});

    auto bad_types = spm.types;
    bad_types[5] = 9;
    check_mentions(load_error(GgufBuilder()
                                  .string("tokenizer.ggml.model", "llama")
                                  .strings("tokenizer.ggml.tokens", spm.tokens)
                                  .i32s("tokenizer.ggml.token_type", bad_types)
                                  .build()),
                   {"tokenizer.ggml.token_type", "token 5", "type 9"});

    check_mentions(load_error(GgufBuilder()
                                  .string("tokenizer.ggml.model", "llama")
                                  .strings("tokenizer.ggml.tokens", spm.tokens)
                                  .i32s("tokenizer.ggml.scores", spm.types)
                                  .build()),
                   {"tokenizer.ggml.scores", "ARRAY of INT32"});

    // token_type is INT32 as llama.cpp reads it: UINT8 or UINT32 types are refused, as UINT8
    // scores are (issue 24: a UINT8 array was accepted before).
    const std::vector<std::uint8_t> u8_types(spm.types.begin(), spm.types.end());
    check_mentions(load_error(GgufBuilder()
                                  .string("tokenizer.ggml.model", "llama")
                                  .strings("tokenizer.ggml.tokens", spm.tokens)
                                  .u8s("tokenizer.ggml.token_type", u8_types)
                                  .build()),
                   {"tokenizer.ggml.token_type", "ARRAY of UINT8", "expected an ARRAY of INT32"});
    const std::vector<std::uint32_t> u32_types(spm.types.begin(), spm.types.end());
    check_mentions(load_error(GgufBuilder()
                                  .string("tokenizer.ggml.model", "llama")
                                  .strings("tokenizer.ggml.tokens", spm.tokens)
                                  .u32s("tokenizer.ggml.token_type", u32_types)
                                  .build()),
                   {"tokenizer.ggml.token_type", "ARRAY of UINT32", "expected an ARRAY of INT32"});

    auto short_scores = spm.scores;
    short_scores.resize(10);
    check_mentions(load_error(GgufBuilder()
                                  .string("tokenizer.ggml.model", "llama")
                                  .strings("tokenizer.ggml.tokens", spm.tokens)
                                  .f32s("tokenizer.ggml.scores", short_scores)
                                  .build()),
                   {"tokenizer.ggml.scores", "has 10 entries"});
}

TEST_CASE("vocab validation: duplicate, missing and empty tokens") {
    MiniSpm dup;
    dup.tokens.back() = "ab";
    check_mentions(load_error(dup.builder().build()), {"tokenizer.ggml.tokens", "same text as token"});

    check_mentions(load_error(GgufBuilder().string("tokenizer.ggml.model", "llama").build()), {"tokenizer.ggml.tokens", "missing"});
    check_mentions(load_error(GgufBuilder().strings("tokenizer.ggml.tokens", {"a"}).build()), {"tokenizer.ggml.model", "missing"});

    MiniSpm empty;
    empty.tokens[262] = "";  // llama.cpp names it [EMPTY_262] and carries on
    const auto tok = Tokenizer::from_gguf(empty.builder().build());
    CHECK(tok.token_text(262) == "[EMPTY_262]");
}

TEST_CASE("vocab validation: unsupported models and pre-tokenizers are named") {
    const auto tokens = byte_level_tokens();
    check_mentions(load_error(GgufBuilder().string("tokenizer.ggml.model", "bert").strings("tokenizer.ggml.tokens", tokens).build()),
                   {"tokenizer.ggml.model", "'bert'"});
    check_mentions(load_error(GgufBuilder()
                                  .string("tokenizer.ggml.model", "gpt2")
                                  .string("tokenizer.ggml.pre", "gpt-4o")
                                  .strings("tokenizer.ggml.tokens", tokens)
                                  .strings("tokenizer.ggml.merges", {"a b"})
                                  .build()),
                   {"tokenizer.ggml.pre", "'gpt-4o'", "llama-bpe", "qwen2"});
    check_mentions(load_error(GgufBuilder()
                                  .string("tokenizer.ggml.model", "gpt2")
                                  .strings("tokenizer.ggml.tokens", tokens)
                                  .strings("tokenizer.ggml.merges", {"a b"})
                                  .build()),
                   {"tokenizer.ggml.pre", "missing"});
}

TEST_CASE("vocab validation: merges are required for BPE and must have two parts") {
    const auto tokens = byte_level_tokens();
    auto base = [&] {
        GgufBuilder b;
        b.string("tokenizer.ggml.model", "gpt2").string("tokenizer.ggml.pre", "llama-bpe").strings("tokenizer.ggml.tokens", tokens);
        return b;
    };
    check_mentions(load_error(base().build()), {"tokenizer.ggml.merges", "missing"});
    check_mentions(load_error(base().strings("tokenizer.ggml.merges", {"a b", "abc"}).build()),
                   {"tokenizer.ggml.merges", "merge 1 'abc'", "no space"});
    check_mentions(load_error(base().i32s("tokenizer.ggml.merges", {1, 2}).build()), {"tokenizer.ggml.merges", "ARRAY of INT32"});
}

TEST_CASE("vocab validation: BOS/EOS requests and byte fallback against what the vocabulary has") {
    MiniSpm spm;
    const auto with_eos = Tokenizer::from_gguf(spm.builder().boolean("tokenizer.ggml.add_eos_token", true).build());
    const auto tokens = with_eos.encode("ab");
    REQUIRE(tokens.size() == 3);
    CHECK(tokens.front().id == 1);
    CHECK((tokens.front().start == 0 && tokens.front().end == 0));  // BOS: empty span at the start
    CHECK(tokens.back().id == 2);
    CHECK((tokens.back().start == 2 && tokens.back().end == 2));    // EOS: empty span at the end
    CHECK(with_eos.encode_ids("ab", {.add_special = false, .add_bos = {}, .parse_special = false}).size() == 1);

    // No byte token for 'z': a clear error at encode time, naming the byte and its offset.
    MiniSpm no_z;
    no_z.tokens[3 + 'z'] = "<0x7A>x";
    no_z.types[3 + 'z'] = 1;
    const auto tok = Tokenizer::from_gguf(no_z.builder().build());
    try {
        tok.encode("abz");
        FAIL("expected an error");
    } catch (const Error& e) {
        check_mentions(e.what(), {"<0x7A>", "byte 2"});
    }

    // Gemma 4 names no BOS by default; add_bos is forced on, so encoding must say so.
    std::vector<std::string> gemma_tokens = {"a", "b", "ab"};
    const auto gemma = Tokenizer::from_gguf(GgufBuilder()
                                                .string("tokenizer.ggml.model", "gemma4")
                                                .strings("tokenizer.ggml.tokens", gemma_tokens)
                                                .strings("tokenizer.ggml.merges", {"a b"})
                                                .build());
    CHECK(gemma.info().add_bos);
    check_mentions([&] {
        try {
            gemma.encode("ab");
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    }(), {"BOS", "tokenizer.ggml.bos_token_id"});
    CHECK(gemma.encode_ids("ab", {.add_special = true, .add_bos = false, .parse_special = false}) == std::vector<std::int32_t>{2});
}
