// Rung: golden (tokenizer). llama.cpp's own tokenizer test vectors (46 texts per vocabulary,
// no BOS/EOS, special tokens not parsed) for the four fixture vocabularies, reproduced id
// for id; every encoding's byte spans must also tile its text.
#include <doctest/doctest.h>

#include "tokenizer_fixtures.hpp"

using namespace ember;

TEST_CASE("tokenizer vectors: llama.cpp's test vectors for llama-spm, llama-bpe, qwen2 and gemma-4") {
    for (const auto& vocab : test::kVectorVocabs) {
        const std::string name = vocab.name;
        CAPTURE(name);
        const auto& tok = test::fixture_tokenizer(vocab.model_path);
        const auto vectors = test::read_test_vectors(vocab.name);
        CHECK(vectors.size() == 46);
        std::size_t passed = 0;
        for (std::size_t i = 0; i < vectors.size(); ++i) {
            CAPTURE(i);
            CAPTURE(vectors[i].text);
            const auto tokens = tok.encode(vectors[i].text, {.add_special = false, .add_bos = {}, .parse_special = false});
            CHECK(test::ids_of(tokens) == vectors[i].ids);
            if (test::ids_of(tokens) == vectors[i].ids) ++passed;
            test::check_spans_tile(tokens, vectors[i].text);
        }
        MESSAGE(name << ": " << passed << "/" << vectors.size() << " vectors exact");
    }
}
