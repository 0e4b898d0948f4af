// Rungs: interventions (`ember generate --sae` and `ember run` with [[sae]] end to end) and
// smoke (bad SAEs refused by the CLI with exit 1, naming the file and key).
//
// - `ember generate --sae DIR --json` with an unedited SAE prints exactly what the run
//   without it prints (tokens, logits, margins);
// - `ember run` with [[sae]] and the ablate built-in zeroing features at sae_features
//   generates, records each SAE file's SHA-256 among run.json's inputs, and changes the
//   generation against the same run without the ablation;
// - a d_in that does not match the site, an unknown hook name, an unknown architecture,
//   a truncated safetensors file and NaN weights each exit 1 with the file and key named.
#include <doctest/doctest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <fstream>
#include <sstream>

#include <ember/npy.hpp>

#include "common/sha256_file.hpp"
#include "gguf/gguf_file.hpp"
#include "models/model.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

const fs::path kScript = fs::path(EMBER_SOURCE_DIR) / "tests/features/sae_fixtures.py";
const char* const kModel = "synth-llama3-q8_0";

std::string numpy_python() {
    for (const char* candidate : {"python3", "/usr/bin/python3"})
        if (run_command(std::string(candidate) + " -c 'import numpy' 2>/dev/null").exit_code == 0) return candidate;
    FAIL("no python3 with NumPy found; install python3-numpy (scripts/setup.sh does)");
    return {};
}

// The fixture SAEs for a model `width` wide, reading layer 1.
fs::path write_fixtures(const fs::path& dir, std::size_t width) {
    std::vector<float> acts(4 * width);
    for (std::size_t i = 0; i < acts.size(); ++i) acts[i] = static_cast<float>((i * 37 % 17) - 8) * 0.05f;
    npy::write_f32(dir / "acts.npy", acts.data(), {4, width});
    const fs::path saes = dir / "saes";
    fs::create_directory(saes);
    const CommandResult r = run_command(numpy_python() + " " + shell_quote(kScript.string()) + " write " +
                                            shell_quote(saes.string()) + " " + shell_quote((dir / "acts.npy").string()) +
                                            " 1 11",
                                        true);
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    return saes;
}

std::size_t model_width() {
    const gguf::File file = gguf::File::open(fixture_path(std::string("models/") + kModel + ".gguf"));
    return models::load_model(file)->config().n_embd;
}

std::string generate(const std::string& extra) {
    const std::string command = std::string(EMBER_BINARY) + " generate --model " +
                                shell_quote(fixture_path(std::string("models/") + kModel + ".gguf").string()) +
                                " --prompt 'hello world' --max-tokens 6 --json " + extra;
    return command;
}

std::string read_text(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

TEST_CASE("ember generate --sae: an unedited SAE prints exactly the run without it") {
    TempDir dir;
    const fs::path saes = write_fixtures(dir.path(), model_width());
    const CommandResult plain = run_command(generate(""));
    REQUIRE_MESSAGE(plain.exit_code == 0, plain.output);
    for (const char* name : {"v6-standard", "v5-topk", "v6-layer-norm", "v6-transcoder"}) {
        CAPTURE(name);
        const CommandResult with_sae = run_command(generate("--sae " + shell_quote((saes / name).string())));
        REQUIRE_MESSAGE(with_sae.exit_code == 0, with_sae.output);
        // Timings differ; everything else (tokens, steps' logits and margins, text) must not.
        auto a = boost::json::parse(plain.output).as_object();
        auto b = boost::json::parse(with_sae.output).as_object();
        for (auto* o : {&a, &b}) o->erase("timings");
        CHECK(boost::json::serialize(a) == boost::json::serialize(b));
    }
}

TEST_CASE("bad SAEs are refused with exit 1, naming the file and the key") {
    TempDir dir;
    const std::size_t width = model_width();
    const fs::path saes = write_fixtures(dir.path(), width);

    // d_in that does not match the site: the fixtures of a model twice as wide.
    TempDir wide_dir;
    const fs::path wide = write_fixtures(wide_dir.path(), 2 * width) / "v6-standard";
    CommandResult r = run_command(generate("--sae " + shell_quote(wide.string())), true);
    CHECK(r.exit_code == 1);
    CHECK_MESSAGE(r.output.find(wide.string() + ": d_in " + std::to_string(2 * width) + ", but after_layer:1") !=
                      std::string::npos,
                  r.output);

    // cfg.json edits: an unknown hook, an unknown architecture.
    const auto edit_cfg = [&](const std::string& from, const std::string& to) {
        const fs::path copy = dir.path() / ("edited-" + std::to_string(std::hash<std::string>{}(to)));
        fs::copy(saes / "v6-standard", copy, fs::copy_options::recursive);
        std::string cfg = read_text(copy / "cfg.json");
        const auto at = cfg.find(from);
        REQUIRE(at != std::string::npos);
        cfg.replace(at, from.size(), to);
        std::ofstream(copy / "cfg.json", std::ios::binary) << cfg;
        return copy;
    };
    const fs::path unknown_hook = edit_cfg("blocks.1.hook_resid_post", "blocks.1.hook_q");
    r = run_command(generate("--sae " + shell_quote(unknown_hook.string())), true);
    CHECK(r.exit_code == 1);
    CHECK_MESSAGE(r.output.find((unknown_hook / "cfg.json").string() + ": hook name 'blocks.1.hook_q'") != std::string::npos,
                  r.output);
    const fs::path unknown_arch = edit_cfg("\"architecture\": \"standard\"", "\"architecture\": \"matryoshka\"");
    r = run_command(generate("--sae " + shell_quote(unknown_arch.string())), true);
    CHECK(r.exit_code == 1);
    CHECK_MESSAGE(r.output.find("cfg.json: key 'architecture': 'matryoshka' is not one Ember computes") != std::string::npos,
                  r.output);

    // A truncated safetensors file, NaN weights.
    const fs::path truncated = dir.path() / "truncated";
    fs::copy(saes / "v6-standard", truncated, fs::copy_options::recursive);
    const fs::path weights = truncated / "sae_weights.safetensors";
    fs::resize_file(weights, fs::file_size(weights) - 100);
    r = run_command(generate("--sae " + shell_quote(truncated.string())), true);
    CHECK(r.exit_code == 1);
    CHECK_MESSAGE(r.output.find(weights.string() + ": tensor '") != std::string::npos, r.output);
    CHECK_MESSAGE(r.output.find("the file is truncated") != std::string::npos, r.output);

    const fs::path with_nan = dir.path() / "nan";
    fs::copy(saes / "v6-standard", with_nan, fs::copy_options::recursive);
    const fs::path nan_weights = with_nan / "sae_weights.safetensors";
    {
        std::fstream f(nan_weights, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(-4, std::ios::end);  // the last tensor's last element (b_enc, sorted last)
        const float nan = std::numeric_limits<float>::quiet_NaN();
        f.write(reinterpret_cast<const char*>(&nan), 4);
    }
    r = run_command(generate("--sae " + shell_quote(with_nan.string())), true);
    CHECK(r.exit_code == 1);
    CHECK_MESSAGE(r.output.find(nan_weights.string() + ": tensor 'b_enc': element") != std::string::npos, r.output);
    CHECK_MESSAGE(r.output.find("is NaN") != std::string::npos, r.output);
}

TEST_CASE("ember run with [[sae]]: the SAE's files are inputs, and ablating its features changes the generation") {
    TempDir dir;
    const fs::path saes = write_fixtures(dir.path(), model_width());
    const fs::path sae = saes / "v6-standard";
    const auto write_config = [&](const std::string& name, bool ablate) {
        std::string text = "[model]\npath = " + boost::json::serialize(boost::json::value(
                                                     fixture_path(std::string("models/") + kModel + ".gguf").string())) +
                           "\n[prompt]\ntext = \"hello world\"\n[generation]\nmax_tokens = 6\n[output]\ndir = " +
                           boost::json::serialize(boost::json::value((dir.path() / name).string())) +
                           "\n[[sae]]\npath = " + boost::json::serialize(boost::json::value(sae.string())) + "\n";
        if (ablate) {
            text += "[[experiment]]\nplugin = " +
                    boost::json::serialize(boost::json::value((fs::path(EMBER_BUILTIN_PLUGIN_DIR) / "libablate.so").string())) +
                    "\n[experiment.config]\nstage = \"sae_features\"\nlayers = [1]\n";
        }
        const fs::path path = dir.path() / (name + ".toml");
        std::ofstream(path) << text;
        return path;
    };
    const CommandResult plain = run_command(std::string(EMBER_BINARY) + " run " + shell_quote(write_config("plain", false).string()), true);
    REQUIRE_MESSAGE(plain.exit_code == 0, plain.output);
    const CommandResult ablated =
        run_command(std::string(EMBER_BINARY) + " run " + shell_quote(write_config("ablated", true).string()), true);
    REQUIRE_MESSAGE(ablated.exit_code == 0, ablated.output);

    const auto run_json = [&](const std::string& name) {
        return boost::json::parse(read_text(dir.path() / name / "run.json")).as_object();
    };
    const auto plain_run = run_json("plain"), ablated_run = run_json("ablated");
    std::size_t sae_inputs = 0;
    for (const auto& input : plain_run.at("inputs").as_array()) {
        const auto& o = input.as_object();
        if (o.at("role").as_string() != "sae") continue;
        ++sae_inputs;
        CHECK(std::string(o.at("sha256").as_string()) == sha256_file_hex(std::string(o.at("path").as_string())));
    }
    CHECK(sae_inputs == 2);  // cfg.json and sae_weights.safetensors
    CHECK(boost::json::serialize(plain_run.at("generated")) != boost::json::serialize(ablated_run.at("generated")));
}

}  // namespace ember::test
