// Rung: smoke (CLI). `ember tokenize` through the real binary: the --json form parses with
// Boost.JSON and agrees with the library (ids, spans, pieces or piece_hex); --no-bos,
// --special, --ids, --file with invalid UTF-8; usage errors exit 2, bad input exits 1.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "support/fixtures.hpp"
#include "tokenizer_fixtures.hpp"

using namespace ember;
namespace json = boost::json;
using test::run_command;
using test::shell_quote;

namespace {

const char* const kLlama3 = "models/synth-llama3-q8_0.gguf";

std::string model_arg(const char* model) { return shell_quote(test::fixture_path(model).string()); }

test::CommandResult tokenize(const std::string& args, bool merge_stderr = false) {
    return run_command(std::string(EMBER_BINARY) + " tokenize " + args, merge_stderr);
}

json::object tokenize_json(const std::string& args) {
    const auto r = tokenize(args + " --json");
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    return json::parse(r.output).as_object();
}

// The piece of a JSON token: its text, or the bytes of piece_hex when it has no text.
std::string piece_bytes(const json::object& t) {
    if (t.at("piece").is_null()) return test::hex_decode(t.at("piece_hex").as_string());
    CHECK(!t.contains("piece_hex"));
    return std::string(t.at("piece").as_string());
}

// Compares the JSON tokens with the library's encoding of the same text.
void check_against_library(const json::object& out, const tokenizer::Tokenizer& tok, const std::string& text,
                           const tokenizer::EncodeOptions& options) {
    const auto expected = tok.encode(text, options);
    const auto& tokens = out.at("tokens").as_array();
    REQUIRE(tokens.size() == expected.size());
    CHECK(out.at("n_tokens").to_number<std::size_t>() == expected.size());
    CHECK(out.at("text_bytes").to_number<std::size_t>() == text.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        CAPTURE(i);
        const auto& t = tokens[i].as_object();
        CHECK(t.at("id").to_number<std::int32_t>() == expected[i].id);
        CHECK(t.at("start").to_number<std::size_t>() == expected[i].start);
        CHECK(t.at("end").to_number<std::size_t>() == expected[i].end);
        CHECK(piece_bytes(t) == tok.piece(expected[i].id, true));
    }
}

// A temporary file holding `bytes`, removed when the object goes.
struct TempFile {
    std::filesystem::path path;
    explicit TempFile(const std::string& bytes) {
        path = std::filesystem::temp_directory_path() / ("ember-tokenize-test-" + std::to_string(::getpid()) + ".txt");
        std::ofstream(path, std::ios::binary) << bytes;
    }
    ~TempFile() { std::filesystem::remove(path); }
};

}  // namespace

TEST_CASE("ember tokenize --json: ids, pieces and spans agree with the library") {
    const std::string text = "كتب الطالب الدرس 🦊 naïve";
    const auto& tok = test::fixture_tokenizer(kLlama3);
    const auto out = tokenize_json("--model " + model_arg(kLlama3) + " --prompt " + shell_quote(text));
    CHECK(out.at("schema_version") == 1);
    CHECK(out.at("tokenizer").at("model") == "gpt2");
    CHECK(out.at("tokenizer").at("pre") == "llama-bpe");
    CHECK(out.at("add_bos") == true);
    CHECK(out.at("parse_special") == false);
    check_against_library(out, tok, text, {});

    // The fox is split over byte-level tokens: those pieces are not UTF-8 and come as hex.
    std::size_t hex_pieces = 0;
    std::string joined;
    for (const auto& t : out.at("tokens").as_array()) {
        hex_pieces += t.as_object().at("piece").is_null() ? 1 : 0;
        joined += piece_bytes(t.as_object());
    }
    CHECK(hex_pieces >= 2);
    CHECK(joined == "<|begin_of_text|>" + text);
}

TEST_CASE("ember tokenize: --no-bos, --special and --ids") {
    const auto& qwen = test::fixture_tokenizer("models/synth-qwen3-q8_0.gguf");
    const std::string text = "<|im_start|>user\nمرحبا<|im_end|>";
    const std::string base = "--model " + model_arg("models/synth-qwen3-q8_0.gguf") + " --prompt " + shell_quote(text);

    const auto special = tokenize_json(base + " --special");
    CHECK(special.at("parse_special") == true);
    check_against_library(special, qwen, text, {.add_special = true, .add_bos = {}, .parse_special = true});
    CHECK(special.at("tokens").as_array().front().at("id") == 151644);

    const auto plain = tokenize_json(base);
    check_against_library(plain, qwen, text, {});
    CHECK(plain.at("tokens").as_array().front().at("id") != 151644);

    const auto& llama3 = test::fixture_tokenizer(kLlama3);
    const auto no_bos = tokenize_json("--model " + model_arg(kLlama3) + " --prompt hello --no-bos");
    CHECK(no_bos.at("add_bos") == false);
    check_against_library(no_bos, llama3, "hello", {.add_special = true, .add_bos = false, .parse_special = false});

    const auto ids = tokenize("--model " + model_arg(kLlama3) + " --prompt " + shell_quote("Hello, world!") + " --ids");
    REQUIRE(ids.exit_code == 0);
    std::istringstream in(ids.output);
    std::vector<std::int32_t> printed;
    std::int32_t id;
    while (in >> id) printed.push_back(id);
    CHECK(printed == llama3.encode_ids("Hello, world!"));
}

TEST_CASE("ember tokenize --file: any bytes, including invalid UTF-8, give valid JSON") {
    const std::string bytes = "ok \xF0\x9F\xA6 \xFF\nكتب\xD9";
    const TempFile file(bytes);
    for (const char* model : {kLlama3, "tokenizer/ggml-vocab-llama-spm.gguf", "models/synth-gemma4-q8_0.gguf"}) {
        CAPTURE(model);
        const auto out = tokenize_json("--model " + model_arg(model) + " --file " + shell_quote(file.path.string()));
        check_against_library(out, test::fixture_tokenizer(model), bytes, {});
    }

    // The default table: two header lines, then one line per token.
    const auto table = tokenize("--model " + model_arg(kLlama3) + " --file " + shell_quote(file.path.string()));
    REQUIRE(table.exit_code == 0);
    std::size_t lines = 0;
    for (const char c : table.output) lines += c == '\n';
    CHECK(lines == 2 + test::fixture_tokenizer(kLlama3).encode(bytes).size());
    CHECK(table.output.rfind("# ", 0) == 0);
}

TEST_CASE("ember tokenize: usage errors exit 2, failures exit 1 naming the problem") {
    const std::string model = "--model " + model_arg(kLlama3);
    for (const std::string& args : {std::string("--prompt x"), model, model + " --prompt x --file y",
                                   model + " --prompt x --json --ids", model + " --prompt x --bogus"}) {
        CAPTURE(args);
        const auto r = tokenize(args, true);
        CHECK(r.exit_code == 2);
        CHECK(r.output.find("error:") != std::string::npos);
    }
    const auto missing_model = tokenize("--model /nonexistent/model.gguf --prompt x", true);
    CHECK(missing_model.exit_code == 1);
    CHECK(missing_model.output.find("/nonexistent/model.gguf") != std::string::npos);

    const auto missing_file = tokenize(model + " --file /nonexistent/prompt.txt", true);
    CHECK(missing_file.exit_code == 1);
    CHECK(missing_file.output.find("/nonexistent/prompt.txt") != std::string::npos);
}
