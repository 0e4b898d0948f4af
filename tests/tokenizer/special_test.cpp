// Rung: smoke (special tokens). Special/control token texts are split out of the input only
// on request, except USER_DEFINED tokens, which llama.cpp always splits out; and the
// end-of-generation set of each fixture vocabulary (model-math §8.3, §8.7).
#include <doctest/doctest.h>

#include <algorithm>

#include "gguf_builder.hpp"
#include "tokenizer_fixtures.hpp"

using namespace ember;
using tokenizer::EncodeOptions;
using tokenizer::TokenType;

namespace {

constexpr EncodeOptions kPlain{.add_special = false, .add_bos = {}, .parse_special = false};
constexpr EncodeOptions kParse{.add_special = false, .add_bos = {}, .parse_special = true};

std::int32_t id_of(const tokenizer::Tokenizer& tok, std::string_view text) {
    for (std::size_t id = 0; id < tok.vocab_size(); ++id) {
        if (tok.token_text(static_cast<std::int32_t>(id)) == text) return static_cast<std::int32_t>(id);
    }
    FAIL("no token " << text);
    return -1;
}

bool contains(const std::vector<std::int32_t>& ids, std::int32_t id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

std::vector<std::int32_t> concat(std::initializer_list<std::vector<std::int32_t>> parts) {
    std::vector<std::int32_t> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

}  // namespace

TEST_CASE("special tokens: CONTROL texts are split out only with parse_special") {
    const auto& qwen = test::fixture_tokenizer("models/synth-qwen3-q8_0.gguf");
    const std::int32_t im_start = id_of(qwen, "<|im_start|>");
    CHECK(qwen.token_type(im_start) == TokenType::Control);
    const std::string text = "<|im_start|>user\nhi";

    const auto parsed = qwen.encode(text, kParse);
    REQUIRE(!parsed.empty());
    CHECK(parsed[0].id == im_start);
    CHECK((parsed[0].start == 0 && parsed[0].end == 12));
    CHECK(test::ids_of(parsed) == concat({{im_start}, qwen.encode_ids("user\nhi", kPlain)}));

    const auto plain = qwen.encode_ids(text, kPlain);
    CHECK(!contains(plain, im_start));
    CHECK(qwen.decode(plain) == text);  // tokenized as ordinary text

    // The special text counts in pieces only when asked for.
    CHECK(qwen.piece(im_start) == "");
    CHECK(qwen.piece(im_start, true) == "<|im_start|>");
    CHECK(qwen.decode(test::ids_of(parsed)) == "user\nhi");
}

TEST_CASE("special tokens: USER_DEFINED texts are always split out") {
    const auto& qwen = test::fixture_tokenizer("models/synth-qwen3-q8_0.gguf");
    const std::int32_t pad = id_of(qwen, "[PAD151650]");
    CHECK(qwen.token_type(pad) == TokenType::UserDefined);
    const auto tokens = qwen.encode("a[PAD151650]b", kPlain);
    CHECK(test::ids_of(tokens) == concat({qwen.encode_ids("a", kPlain), {pad}, qwen.encode_ids("b", kPlain)}));
    test::check_spans_tile(tokens, "a[PAD151650]b");

    const auto& gemma = test::fixture_tokenizer("models/synth-gemma4-q8_0.gguf");
    const std::int32_t channel = id_of(gemma, "<|channel>");
    CHECK(gemma.token_type(channel) == TokenType::UserDefined);
    CHECK(contains(gemma.encode_ids("x<|channel>thought", kPlain), channel));
    CHECK(gemma.piece(channel) == "<|channel>");  // USER_DEFINED pieces are their text

    // Gemma 4's <|turn> is CONTROL: text unless parsing is asked for.
    const std::int32_t turn = id_of(gemma, "<|turn>");
    CHECK(!contains(gemma.encode_ids("<|turn>user", kPlain), turn));
    CHECK(contains(gemma.encode_ids("<|turn>user", kParse), turn));
}

TEST_CASE("special tokens: SentencePiece adds its space after every special token") {
    const auto& spm = test::fixture_tokenizer("tokenizer/ggml-vocab-llama-spm.gguf");
    const auto ids = spm.encode_ids("Hello</s>world", {.add_special = true, .add_bos = {}, .parse_special = true});
    // "world" after </s> tokenizes as if it began the text: with the added space.
    CHECK(ids == concat({{1}, spm.encode_ids("Hello", kPlain), {2}, spm.encode_ids("world", kPlain)}));
    CHECK(!contains(spm.encode_ids("Hello</s>world", kPlain), 2));
}

TEST_CASE("special tokens: longer texts are split out first, each leftmost and without overlap") {
    // A Gemma-4-style vocabulary whose special texts contain one another.
    const std::vector<std::string> tokens = {"x", "a", "b", "c", "<s>", "ab", "abc", "aba", "<s><s>"};
    const std::vector<std::int32_t> types = {1, 1, 1, 1, 3, 4, 4, 4, 3};
    const auto tok = tokenizer::Tokenizer::from_gguf(test::GgufBuilder()
                                                         .string("tokenizer.ggml.model", "gemma4")
                                                         .strings("tokenizer.ggml.tokens", tokens)
                                                         .i32s("tokenizer.ggml.token_type", types)
                                                         .strings("tokenizer.ggml.merges", {"x x"})
                                                         .u32("tokenizer.ggml.bos_token_id", 4)
                                                         .build());
    using Ids = std::vector<std::int32_t>;
    CHECK(tok.encode_ids("xabcx", kPlain) == Ids{0, 6, 0});       // abc, not ab + c
    CHECK(tok.encode_ids("xabx", kPlain) == Ids{0, 5, 0});
    CHECK(tok.encode_ids("ababa", kPlain) == Ids{7, 2, 1});       // leftmost occurrence, no overlap
    CHECK(tok.encode_ids("<s><s><s>", kParse) == Ids{8, 4});      // the longer CONTROL text first
}

// The sets below are what llama.cpp reports for these files (node-llama-cpp isEogToken).
TEST_CASE("end of generation: the EOG set of each fixture vocabulary") {
    struct Expect {
        const char* model;
        std::vector<const char*> eog;
        std::vector<const char*> not_eog;
    };
    const Expect cases[] = {
        {"tokenizer/ggml-vocab-llama-spm.gguf", {"</s>"}, {"<s>", "<unk>"}},
        {"models/stories260K.gguf", {"</s>"}, {"<s>"}},
        {"models/synth-llama3-q8_0.gguf", {"<|end_of_text|>", "<|eot_id|>"}, {"<|begin_of_text|>", "<|start_header_id|>"}},
        // The Qwen vocabulary also has "</s>" as an ordinary BPE token; llama.cpp's text rule
        // makes it end generation too (checked with node-llama-cpp's isEogToken).
        {"models/synth-qwen3-q8_0.gguf", {"<|endoftext|>", "<|im_end|>", "</s>"}, {"<|im_start|>"}},
        {"models/synth-gemma4-q8_0.gguf", {"<eos>", "<turn|>", "<|tool_response>"}, {"<bos>", "<|turn>", "<pad>"}},
    };
    for (const auto& c : cases) {
        const std::string model = c.model;
        CAPTURE(model);
        const auto& tok = test::fixture_tokenizer(c.model);
        for (const char* text : c.eog) {
            CAPTURE(text);
            const std::int32_t id = id_of(tok, text);
            CHECK(tok.is_end_of_generation(id));
            CHECK(tok.token_type(id) == TokenType::Control);  // llama.cpp forces EOG tokens to CONTROL
        }
        for (const char* text : c.not_eog) {
            CAPTURE(text);
            CHECK(!tok.is_end_of_generation(id_of(tok, text)));
        }
        CHECK(tok.end_of_generation_ids().size() == c.eog.size());
        CHECK(tok.is_end_of_generation(static_cast<std::int32_t>(*tok.info().eos_id)));
    }
}
