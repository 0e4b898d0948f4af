// Rung: activation-reference. `ember extract --route reference` on every fixture model and
// every golden prompt, against llama.cpp's MODEL.f32.golden.json: after_layer.layerN.npy
// is l_out-N and before_logits.npy is result_norm, every prompt position, within 1e-5
// (Llama, Qwen3) / 2e-3 (Gemma 4, llama.cpp's F16-table GELU) relative to the largest
// |golden value| of the tensor. Read back twice: in C++ with ember/npy.hpp, and by
// check_extraction.py with NumPy alone (which also re-checks the manifest's seal and
// checksums without Ember). The manifest's tokenizer record matches the tokenizer (ids,
// byte spans, pieces) and the golden (ids, pieces, BOS); its model record matches the
// fixtures' SHA256SUMS; `ember verify` accepts the directory.
#include <doctest/doctest.h>
#include <ember/npy.hpp>
#include <fmt/format.h>

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "gguf/gguf_file.hpp"
#include "models/model_config.hpp"
#include "support/files.hpp"
#include "support/fixtures.hpp"
#include "support/golden.hpp"
#include "support/temp_dir.hpp"
#include "tokenizer/tokenizer.hpp"

namespace ember::test {
namespace {

namespace json = boost::json;

double tolerance(models::Family family) { return family == models::Family::Gemma4 ? 2e-3 : 1e-5; }

std::string fixture_sha256(const std::string& model) {
    std::istringstream sums(read_all(fixture_path("models/SHA256SUMS")));
    for (std::string hash, name; sums >> hash >> name;)
        if (name == "models/" + model + ".gguf") return hash;
    FAIL("models/SHA256SUMS has no entry for " << model);
    return {};
}

double relative_error(const std::vector<float>& actual, const GoldenTensor& golden) {
    double max_diff = 0, max_golden = 0;
    for (std::size_t i = 0; i < golden.values.size(); ++i) {
        max_diff = std::max(max_diff, std::abs(static_cast<double>(actual[i]) - golden.values[i]));
        max_golden = std::max(max_golden, std::abs(static_cast<double>(golden.values[i])));
    }
    return max_diff / max_golden;
}

std::string hex(std::string_view bytes) {
    std::string out;
    for (const char c : bytes) out += fmt::format("{:02x}", static_cast<unsigned char>(c));
    return out;
}

}  // namespace

TEST_CASE("ember extract matches the f32 goldens on every fixture and prompt (C++ and NumPy read-back)") {
    const std::filesystem::path checker = std::filesystem::path(EMBER_TEST_SOURCE_DIR) / "check_extraction.py";
    for (const char* name : kFixtureModels) {
        const std::filesystem::path model_path = fixture_path(fmt::format("models/{}.gguf", name));
        const gguf::File file = gguf::File::open(model_path);
        const models::ModelConfig config = models::load_model_config(file);
        const auto tok = tokenizer::Tokenizer::from_gguf(file);
        const Golden golden = load_golden(f32_golden_path(name));
        const double tol = tolerance(config.family);
        double worst = 0;
        for (std::size_t p = 0; p < golden.prompts.size(); ++p) {
            const GoldenPrompt& g = golden.prompts[p];
            CAPTURE(name);
            CAPTURE(p);
            TempDir dir;
            const auto prompt_file = dir.path() / "prompt.txt";
            std::ofstream(prompt_file, std::ios::binary) << g.text;
            const auto out = dir.path() / "run";
            const CommandResult r = run_command(
                fmt::format("{} extract --model {} --file {} --out {} --route reference --threads 2 "
                            "--stages after_layer,before_logits",
                            EMBER_BINARY, shell_quote(model_path.string()), shell_quote(prompt_file.string()),
                            shell_quote(out.string())),
                true);
            REQUIRE_MESSAGE(r.exit_code == 0, r.output);

            // Hidden states, read with the shared .npy reader.
            const std::size_t T = g.tokens.size();
            for (std::uint32_t l = 0; l < config.n_layers; ++l) {
                const npy::Array a = npy::read(out / fmt::format("after_layer.layer{}.npy", l));
                const GoldenTensor& expected = g.hidden.at(fmt::format("l_out-{}", l));
                REQUIRE(a.shape == std::vector<std::size_t>{T, config.n_embd});
                REQUIRE(expected.rows == T);
                const double error = relative_error(a.values, expected);
                CHECK_MESSAGE(error <= tol, "l_out-" << l << " relative error " << error);
                worst = std::max(worst, error);
            }
            const npy::Array normed = npy::read(out / "before_logits.npy");
            REQUIRE(normed.shape == std::vector<std::size_t>{T, config.n_embd});
            const double error = relative_error(normed.values, g.hidden.at("result_norm"));
            CHECK_MESSAGE(error <= tol, "result_norm relative error " << error);
            worst = std::max(worst, error);

            // The tokenizer record: the tokenizer's ids and spans, the golden's ids and pieces.
            const json::object manifest = json::parse(read_all(out / "manifest.json")).as_object();
            const json::object& t = manifest.at("tokenizer").as_object();
            const auto tokens = tok.encode(g.text);
            const json::array& ids = t.at("token_ids").as_array();
            const json::array& records = t.at("tokens").as_array();
            REQUIRE(ids.size() == g.tokens.size());
            REQUIRE(records.size() == tokens.size());
            for (std::size_t i = 0; i < tokens.size(); ++i) {
                const json::object& rec = records[i].as_object();
                CHECK(ids[i].as_int64() == g.tokens[i]);
                CHECK(rec.at("id").as_int64() == tokens[i].id);
                CHECK(static_cast<std::size_t>(rec.at("start").as_int64()) == tokens[i].start);
                CHECK(static_cast<std::size_t>(rec.at("end").as_int64()) == tokens[i].end);
                CHECK(rec.at("piece_hex").as_string() == hex(g.pieces[i]));
            }
            CHECK(t.at("bos_added").as_bool() == golden.add_bos);
            CHECK(static_cast<std::size_t>(t.at("prompt_bytes").as_int64()) == g.text.size());
            CHECK(static_cast<std::size_t>(t.at("vocab_size").as_int64()) == golden.n_vocab);
            const json::object& m = manifest.at("model").as_object();
            CHECK(m.at("sha256").as_string() == fixture_sha256(name));
            CHECK(m.at("family").as_string() == models::family_name(config.family));
            CHECK(manifest.at("route").as_string() == "reference");

            // NumPy, without Ember.
            const CommandResult py = run_command(fmt::format("/usr/bin/python3 {} {} {} {} {}", shell_quote(checker.string()),
                                                             shell_quote(out.string()),
                                                             shell_quote(f32_golden_path(name).string()), p, tol),
                                                 true);
            CHECK_MESSAGE(py.exit_code == 0, py.output);
            const CommandResult verify = run_command(fmt::format("{} verify {}", EMBER_BINARY, shell_quote(out.string())), true);
            CHECK_MESSAGE(verify.exit_code == 0, verify.output);
        }
        MESSAGE(fmt::format("{}: largest relative error {:.2e} (tol {:g})", name, worst, tol));
    }
}

}  // namespace ember::test
