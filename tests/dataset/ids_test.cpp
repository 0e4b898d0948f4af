// Rung: smoke. `ember detokenize` and `ember vocab` print what the tokenizer says (its
// pieces, computed here through the library), on all four vocabularies; bad ids are refused.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <boost/json.hpp>

#include "dataset/dataset_support.hpp"
#include "record/manifest.hpp"
#include "gguf/gguf_file.hpp"
#include "tokenizer/tokenizer.hpp"

namespace ember::test {
TEST_CASE("detokenize and vocab give the tokenizer's pieces") {
    for (const char* model : {"stories260K", "llama-2-tiny-random", "synth-llama3-q8_0", "synth-qwen3-q8_0", "synth-gemma4-q8_0"}) {
        CAPTURE(model);
        const auto file = gguf::File::open(model_file(model));
        const auto tok = tokenizer::Tokenizer::from_gguf(file);
        const auto ids = tok.encode_ids("كتب الطالب 🦊 fox");
        std::string args, joined;
        for (const auto id : ids) {
            args += fmt::format(" {}", id);
            joined += tok.piece(id, true);
        }
        const CommandResult d = ember(fmt::format("detokenize --model {} --json{}", shell_quote(model_file(model).string()), args));
        REQUIRE_MESSAGE(d.exit_code == 0, d.output);
        const boost::json::object o = boost::json::parse(d.output).as_object();
        CHECK(o.at("text_hex").as_string() == record::hex(joined));
        CHECK(o.at("pieces").as_array().size() == ids.size());
        const CommandResult plain = ember(fmt::format("detokenize --model {}{}", shell_quote(model_file(model).string()), args));
        CHECK(plain.output == joined + "\n");

        const CommandResult v = ember(fmt::format("vocab --model {} --json", shell_quote(model_file(model).string())));
        REQUIRE(v.exit_code == 0);
        const boost::json::array vocab = boost::json::parse(v.output).as_array();
        REQUIRE(vocab.size() == tok.vocab_size());
        for (std::size_t id = 0; id < vocab.size(); id += std::max<std::size_t>(1, vocab.size() / 97)) {
            CHECK(vocab[id].at("id").to_number<std::size_t>() == id);
            CHECK(vocab[id].at("piece_hex").as_string() == record::hex(tok.piece(static_cast<std::int32_t>(id), true)));
        }
        const CommandResult bad = ember(fmt::format("detokenize --model {} {}", shell_quote(model_file(model).string()),
                                                    tok.vocab_size()));
        CHECK(bad.exit_code == 2);
        CHECK(bad.output.find("is not a token id") != std::string::npos);
    }
}

}  // namespace ember::test
