// Rung: golden (tokenizer). The token ids llama.cpp fed each fixture model for the golden
// prompts (BOS per the model's add_bos, special tokens parsed, as llama-eval-callback does)
// are reproduced exactly, and each token's piece equals llama.cpp's bytes for it.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include "support/fixtures.hpp"
#include "tokenizer_fixtures.hpp"

using namespace ember;
namespace json = boost::json;

TEST_CASE("tokenizer goldens: the prompt tokens and pieces of every fixture model") {
    std::size_t prompts_checked = 0;
    for (const char* model : test::kFixtureModels) {
        const auto& tok = test::fixture_tokenizer(std::string("models/") + model + ".gguf");
        for (const char* suffix : {".golden.json", ".f32.golden.json"}) {
            const std::string golden_name = std::string(model) + suffix;
            CAPTURE(golden_name);
            const auto golden = json::parse(test::read_file(test::fixture_path("golden/" + golden_name).string())).as_object();
            CHECK(golden.at("n_vocab").to_number<std::size_t>() == tok.vocab_size());
            CHECK(golden.at("add_bos").as_bool() == tok.info().add_bos);
            for (const auto& p : golden.at("prompts").as_array()) {
                const std::string text(p.at("text").as_string());
                CAPTURE(text);
                std::vector<std::int32_t> expected;
                for (const auto& id : p.at("tokens").as_array()) expected.push_back(id.to_number<std::int32_t>());

                const auto tokens = tok.encode(text, {.add_special = true, .add_bos = {}, .parse_special = true});
                CHECK(test::ids_of(tokens) == expected);
                test::check_spans_tile(tokens, text);

                const auto& pieces_hex = p.at("pieces_hex").as_array();
                REQUIRE(pieces_hex.size() == expected.size());
                for (std::size_t i = 0; i < expected.size(); ++i) {
                    CAPTURE(i);
                    CHECK(tok.piece(expected[i], true) == test::hex_decode(pieces_hex[i].as_string()));
                }
                ++prompts_checked;
            }
        }
    }
    CHECK(prompts_checked == std::size(test::kFixtureModels) * 2 * 3);
}
