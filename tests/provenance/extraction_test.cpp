// Rungs: smoke and probes (the logit lens). The extraction engine through its API and the
// command line: an interrupted run leaves no manifest (and removes an earlier one before
// writing); a file that cannot be renamed into place fails the run the same way; chosen
// layers and positions are exactly the matching rows of a full extraction; the logit lens
// at the last layer equals the run's own logits (bitwise, Gemma's soft-cap included);
// the options and a run config are two spellings of one request with one config hash;
// bad requests are refused before anything is written.
#include <doctest/doctest.h>
#include <ember/npy.hpp>
#include <fmt/format.h>

#include <boost/json.hpp>

#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "config/run_config.hpp"
#include "extract/extraction.hpp"
#include "extract/logit_lens.hpp"
#include "record/verify.hpp"
#include "support/files.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

config::RunConfig request(const std::string& model, const fs::path& out) {
    config::RunConfig c;
    c.model.path = fixture_path("models/" + model + ".gguf");
    c.model.threads = 2;
    c.prompt.text = "Once upon a time, there was a little girl";
    c.output.dir = out;
    c.output.extract = true;
    c.tracing.path = out / "trace.jsonl";
    return c;
}

CommandResult extract_cli(const std::string& model, const fs::path& out, const std::string& options) {
    return run_command(fmt::format("{} extract --model {} --prompt {} --out {} --threads 2 {}", EMBER_BINARY,
                                   shell_quote(fixture_path("models/" + model + ".gguf").string()),
                                   shell_quote("Once upon a time, there was a little girl"), shell_quote(out.string()),
                                   options),
                       true);
}

bool has_temporaries(const fs::path& dir) {
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
    return false;
}

}  // namespace

TEST_CASE("an interrupted replacement leaves the earlier run complete, and no temporaries or staging beside it") {
    const extract::LoadedModel model(fixture_path("models/stories260K.gguf"), std::nullopt);
    TempDir dir;
    config::RunConfig c = request("stories260K", dir.path() / "run");
    c.output.stages = {"after_attention", "after_mlp", "after_layer"};
    extract::run_extraction(model, c);
    REQUIRE(record::verify_run_directory(c.output.dir).ok());
    const std::string earlier = read_all(c.output.dir / "manifest.json");

    std::size_t written = 0;
    extract::ExtractionOptions options;
    options.overwrite = true;
    options.on_file_written = [&](const record::FileRecord&) {
        if (++written == 4) throw Error("simulated failure after 4 files");
    };
    CHECK_THROWS_WITH_AS(extract::run_extraction(model, c, options), "simulated failure after 4 files", Error);
    CHECK(written == 4);
    // The replacement was built beside the directory: the earlier run is untouched.
    CHECK(read_all(c.output.dir / "manifest.json") == earlier);
    CHECK(record::verify_run_directory(c.output.dir).ok());
    CHECK(!has_temporaries(c.output.dir));
    for (const auto& e : fs::directory_iterator(dir.path())) CHECK(e.path().filename() == "run");

    // Without overwrite the directory is refused; with it, the same run replaces the earlier one.
    CHECK_THROWS_WITH_AS(extract::run_extraction(model, c), doctest::Contains("the output directory holds"), Error);
    options.on_file_written = {};
    extract::run_extraction(model, c, options);
    CHECK(record::verify_run_directory(c.output.dir).ok());
    for (const auto& e : fs::directory_iterator(dir.path())) CHECK(e.path().filename() == "run");
}

TEST_CASE("a directory holding other files is refused by name before anything is written") {
    TempDir dir;
    const fs::path out = dir.path() / "run";
    fs::create_directories(out / "notes");
    write_all(out / "notes" / "mine.txt", "mine\n");
    const CommandResult r = extract_cli("stories260K", out, "");
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("holds files of no recorded run ('notes/mine.txt')") != std::string::npos);
    CHECK(!fs::exists(out / "manifest.json"));
    CHECK(!fs::exists(out / "after_layer.layer1.npy"));
    CHECK(!has_temporaries(out));
}

TEST_CASE("chosen layers and positions are exactly those rows of a full extraction") {
    TempDir dir;
    REQUIRE(extract_cli("synth-qwen3-q8_0", dir.path() / "full", "--stages after_mlp,before_logits,after_logits").exit_code == 0);
    REQUIRE(extract_cli("synth-qwen3-q8_0", dir.path() / "some",
                        "--stages after_mlp,before_logits,after_logits --layers 2 --positions 5,1")
                .exit_code == 0);
    REQUIRE(extract_cli("synth-qwen3-q8_0", dir.path() / "last", "--stages before_logits --positions last").exit_code == 0);
    const json::object manifest = json::parse(read_all(dir.path() / "some" / "manifest.json")).as_object();
    CHECK(manifest.at("tensor_contract").at("positions") == json::array{1, 5});
    CHECK(manifest.at("tensor_contract").at("layers") == json::array{2});
    CHECK(manifest.at("tensors").as_array().size() == 3);
    CHECK(!fs::exists(dir.path() / "some" / "after_mlp.layer0.npy"));

    for (const char* file : {"after_mlp.layer2.npy", "before_logits.npy", "after_logits.npy"}) {
        CAPTURE(file);
        const npy::Array full = npy::read(dir.path() / "full" / file);
        const npy::Array some = npy::read(dir.path() / "some" / file);
        const std::size_t cols = full.shape[1];
        REQUIRE(some.shape == std::vector<std::size_t>{2, cols});
        CHECK(std::memcmp(some.values.data(), full.values.data() + 1 * cols, cols * 4) == 0);
        CHECK(std::memcmp(some.values.data() + cols, full.values.data() + 5 * cols, cols * 4) == 0);
    }
    // The last position alone needs no logits for the other rows, and is the same row.
    const npy::Array full = npy::read(dir.path() / "full" / "before_logits.npy");
    const npy::Array last = npy::read(dir.path() / "last" / "before_logits.npy");
    REQUIRE(last.shape == std::vector<std::size_t>{1, full.shape[1]});
    CHECK(std::memcmp(last.values.data(), full.values.data() + (full.shape[0] - 1) * full.shape[1], full.shape[1] * 4) == 0);
}

TEST_CASE("logit lens: at the last layer it is the run's own logits, soft-cap included") {
    for (const char* name : {"stories260K", "synth-gemma4-q8_0"}) {
        CAPTURE(name);
        TempDir dir;
        const fs::path out = dir.path() / "run";
        REQUIRE(extract_cli(name, out, "--logits all --logit-lens 8").exit_code == 0);
        const json::object manifest = json::parse(read_all(out / "manifest.json")).as_object();
        const auto n_layers = manifest.at("model").at("dims").at("n_layers").as_int64();
        const npy::Array logits = npy::read(out / "logits.npy");
        const std::size_t T = logits.shape[0], V = logits.shape[1], K = 8;
        for (std::int64_t l = 0; l < n_layers; ++l) {
            const npy::Header ids_header = npy::read_header(out / fmt::format("logit_lens.layer{}.ids.npy", l));
            CHECK(ids_header.descr == "<i4");
            CHECK(ids_header.shape == std::vector<std::size_t>{T, K});
            const npy::Array lens = npy::read(out / fmt::format("logit_lens.layer{}.logits.npy", l));
            for (std::size_t p = 0; p < T; ++p)
                for (std::size_t k = 1; k < K; ++k) CHECK(lens.values[p * K + k - 1] >= lens.values[p * K + k]);
        }
        // The last layer: read the ids as raw int32 after the header.
        const fs::path ids_path = out / fmt::format("logit_lens.layer{}.ids.npy", n_layers - 1);
        const npy::Header h = npy::read_header(ids_path);
        const std::string raw = read_all(ids_path).substr(h.data_offset);
        const npy::Array lens = npy::read(out / fmt::format("logit_lens.layer{}.logits.npy", n_layers - 1));
        std::vector<std::int32_t> expected_ids(K);
        std::vector<float> expected_logits(K);
        for (std::size_t p = 0; p < T; ++p) {
            extract::top_k(logits.values.data() + p * V, V, K, expected_ids.data(), expected_logits.data());
            CHECK(std::memcmp(raw.data() + p * K * 4, expected_ids.data(), K * 4) == 0);
            CHECK(std::memcmp(lens.values.data() + p * K, expected_logits.data(), K * 4) == 0);
        }
    }
}

TEST_CASE("the fast route extracts too, and the manifest says which kernels ran") {
    if (test::fast_route_missing()) return;
    TempDir dir;
    const fs::path out = dir.path() / "run";
    const CommandResult r = extract_cli("synth-llama3-q8_0", out, "--route fast --stages after_layer --layers 0");
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    const json::object manifest = json::parse(read_all(out / "manifest.json")).as_object();
    CHECK(manifest.at("route") == "fast");
    CHECK(manifest.at("backend").at("route") == "fast");
    CHECK(manifest.at("backend").at("variant") != "scalar-reference");
    CHECK(manifest.at("config").at("model").at("route") == "fast");
    CHECK(record::verify_run_directory(out).ok());
}

TEST_CASE("ember extract options and a run config are one request with one config hash") {
    TempDir dir;
    const fs::path out = dir.path() / "run";
    const fs::path toml = dir.path() / "x.toml";
    std::ofstream(toml) << fmt::format(R"([model]
path = "{}"
threads = 2
[prompt]
text = "Once upon a time, there was a little girl"
[output]
dir = "run"
stages = ["after_layer", "before_logits"]
layers = [1, 3]
positions = "last"
logits = "last"
logit_lens = 4
)",
                                       fixture_path("models/stories260K.gguf").string());
    REQUIRE(extract_cli("stories260K", out,
                        "--stages after_layer,before_logits --layers 1,3 --positions last --logits last --logit-lens 4")
                .exit_code == 0);
    const std::string from_options(json::parse(read_all(out / "manifest.json")).at("config_hash").as_string());
    const CommandResult r =
        run_command(fmt::format("{} extract --overwrite {}", EMBER_BINARY, shell_quote(toml.string())), true);
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    const std::string from_config(json::parse(read_all(out / "manifest.json")).at("config_hash").as_string());
    CHECK(from_options == from_config);
    config::RunConfig loaded = config::load_run_config(toml);
    loaded.output.extract = true;
    CHECK(config::config_hash(loaded) == from_config);

    // With a config, the request is the config's: options that would change it are refused.
    const CommandResult mixed =
        run_command(fmt::format("{} extract {} --layers 1", EMBER_BINARY, shell_quote(toml.string())), true);
    CHECK(mixed.exit_code == 2);
    CHECK(mixed.output.find("--layers cannot be combined with a run config") != std::string::npos);
}

TEST_CASE("bad extraction requests are refused before anything is written") {
    TempDir dir;
    const fs::path out = dir.path() / "run";
    struct Case {
        const char* options;
        int exit_code;
        const char* message;
    };
    const Case cases[] = {
        {"--layers 5", 1, "output.layers names layer 5 but the model has 5 layers (0-4)"},
        {"--positions 0,99", 1, "output.positions names position 99 but the prompt has 13 tokens (0-12)"},
        {"--logit-lens 513", 1, "output.logit_lens = 513 is larger than the vocabulary (512 tokens)"},
        {"--stages after_layer,bogus", 2, "--stages 'after_layer,bogus': unknown stage 'bogus'"},
        {"--layers 1,x", 2, "--layers '1,x': 'x' is not a non-negative integer"},
        {"--positions 2,2", 2, "--positions '2,2': 2 is given twice"},
        {"--logits some", 2, "--logits 'some' is not one of none, last, all"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.options);
        const CommandResult r = extract_cli("stories260K", out, c.options);
        CHECK(r.exit_code == c.exit_code);
        CHECK_MESSAGE(r.output.find(c.message) != std::string::npos, r.output);
        CHECK((!fs::exists(out) || fs::is_empty(out)));
    }
}

}  // namespace ember::test
