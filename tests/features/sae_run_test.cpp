// Rungs: smoke (bit-identity with Ember's own runs: `ember merge` of dataset shards holding
// SAE features, dense and sparse, is the unsharded run's directory byte for byte, manifest
// included, and shards that read different SAEs are refused naming them; `ember run` with
// [[sae]] and `[output] extract = true` writes the feature arrays and manifest entries
// `ember extract --sae` writes, in this process and in a supervised worker) and activation-reference (an SAE at before_logits, the
// final norm's output, `model.norm`: `ember extract --sae`'s features on Llama, Qwen3 and
// Gemma 4 equal the NumPy float64 reference computed from the before_logits rows the same
// run extracted, within 1e-5 relative and the same active set except within 1e-6 of a
// boundary; a dataset run's are the same bytes packed and one sample at a time).
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <boost/json.hpp>

#include <ember/npy.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "models/model.hpp"
#include "support/files.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

const fs::path kScript = fs::path(EMBER_SOURCE_DIR) / "tests/features/sae_fixtures.py";

std::string model_path(const std::string& name) { return fixture_path("models/" + name + ".gguf").string(); }

CommandResult ember(const std::string& args) {
    return run_command(fmt::format("env -u EMBER_DEFAULTS XDG_CONFIG_HOME=/nonexistent {} {}", EMBER_BINARY, args), true);
}

void run_python(const std::string& arguments) {
    const CommandResult r = run_command("/usr/bin/python3 " + shell_quote(kScript.string()) + " " + arguments, true);
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
}

// The fixture SAEs (tests/features/sae_fixtures.py) for `model`'s width, at layer 1.
fs::path write_fixtures(const fs::path& dir, const std::string& model) {
    const gguf::File file = gguf::File::open(model_path(model));
    const std::size_t width = models::load_model(file)->config().n_embd;
    std::vector<float> acts(4 * width);
    for (std::size_t i = 0; i < acts.size(); ++i) acts[i] = static_cast<float>(static_cast<int>(i * 37 % 17) - 8) * 0.05f;
    npy::write_f32(dir / "acts.npy", acts.data(), {4, width});
    const fs::path saes = dir / "saes";
    fs::create_directory(saes);
    run_python("write " + shell_quote(saes.string()) + " " + shell_quote((dir / "acts.npy").string()) + " 1 11");
    return saes;
}

// A copy of the SAE `from` whose cfg.json names `hook` (SAELens 6: metadata.hook_name).
fs::path with_hook(const fs::path& from, const fs::path& to, const std::string& hook) {
    fs::create_directory(to);
    for (const auto& e : fs::directory_iterator(from)) fs::copy_file(e.path(), to / e.path().filename());
    json::object cfg = json::parse(read_all(to / "cfg.json")).as_object();
    cfg["metadata"].as_object()["hook_name"] = hook;
    write_all(to / "cfg.json", json::serialize(cfg));
    return to;
}

json::object manifest(const fs::path& run) { return json::parse(read_all(run / "manifest.json")).as_object(); }

std::map<std::string, std::string> files_of(const fs::path& dir) {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) out[e.path().lexically_relative(dir).generic_string()] = read_all(e.path());
    return out;
}

// The names of the files that differ between two directories ("" when none).
std::string differing_files(const fs::path& a, const fs::path& b) {
    const auto fa = files_of(a), fb = files_of(b);
    std::string out;
    for (const auto& [name, bytes] : fa)
        if (!fb.contains(name) || fb.at(name) != bytes) out += name + " ";
    for (const auto& [name, bytes] : fb)
        if (!fa.contains(name)) out += name + "(only in " + b.string() + ") ";
    return out;
}

// Six samples, some selecting a part, so that a few tokens per batch make several batches.
fs::path write_dataset(const fs::path& dir) {
    const fs::path data = dir / "data.jsonl";
    write_all(data, R"({"id": "a", "text": "hello world"})"
                    "\n"
                    R"({"id": "b", "text": "the quick brown fox jumps", "select": "substring:brown fox"})"
                    "\n"
                    R"({"id": "c", "text": "one more sample of text here", "select": "last"})"
                    "\n"
                    R"({"id": "d", "text": "short"})"
                    "\n"
                    R"({"id": "e", "text": "كتب الطالب الدرس في المكتبة"})"
                    "\n"
                    R"({"id": "f", "text": "a last one"})"
                    "\n");
    return data;
}

// Features against the NumPy reference (sae_fixtures.py) from `site_file`'s rows.
void check_against_reference(const fs::path& run, std::size_t i, const fs::path& sae_dir, const fs::path& site_file,
                             const fs::path& scratch) {
    const fs::path prefix = scratch / fmt::format("ref{}", i);
    run_python("reference " + shell_quote(sae_dir.string()) + " " + shell_quote(site_file.string()) + " " +
               shell_quote(prefix.string()));
    const npy::Array got = npy::read(run / fmt::format("sae_features.sae{}.npy", i));
    const npy::Array want = npy::read(prefix.string() + ".features.npy");
    const npy::Array margin = npy::read(prefix.string() + ".margin.npy");
    REQUIRE(got.shape == want.shape);
    std::size_t active = 0, set_mismatches = 0, value_failures = 0;
    for (std::size_t k = 0; k < got.values.size(); ++k) {
        const bool fires = got.values[k] != 0.0f, should = want.values[k] != 0.0f;
        active += should;
        if (fires != should) {
            if (margin.values[k] >= 1e-6) ++set_mismatches;
            continue;
        }
        const double error = std::abs(static_cast<double>(got.values[k]) - want.values[k]);
        if (error > 1e-5 * std::abs(want.values[k]) + 1e-7) ++value_failures;
    }
    CHECK(active > 0);
    CHECK(active < got.values.size());
    CHECK(set_mismatches == 0);
    CHECK(value_failures == 0);
}

const char* const kMergeSaes[] = {"v6-standard", "v6-topk", "v6-transcoder"};

}  // namespace

TEST_CASE("smoke: ember merge joins dataset shards with SAE features into the unsharded run, byte for byte") {
    TempDir dir;
    const fs::path saes = write_fixtures(dir.path(), "synth-llama3-q8_0");
    const fs::path data = write_dataset(dir.path());
    std::string sae_args;
    for (const char* name : kMergeSaes) sae_args += " --sae " + shell_quote((saes / name).string());
    for (const char* layout : {"dense", "sparse"}) {
        CAPTURE(layout);
        const std::string common = fmt::format(
            "extract --model {} --dataset {} --stages after_layer --layers 1 --batch-tokens 8 --threads 2 "
            "--sae-output {}{}",
            shell_quote(model_path("synth-llama3-q8_0")), shell_quote(data.string()), layout, sae_args);
        const fs::path full = dir.path() / (std::string("full-") + layout);
        const fs::path reference = dir.path() / (std::string("reference-") + layout);
        CommandResult r = ember(common + " --out " + shell_quote(full.string()));
        REQUIRE_MESSAGE(r.exit_code == 0, r.output);
        fs::rename(full, reference);
        for (const std::size_t n : {2, 3}) {
            CAPTURE(n);
            std::string merge = "merge";
            for (std::size_t k = n; k-- > 0;) {  // given in reverse: the merge orders them
                const fs::path shard = dir.path() / fmt::format("{}-{}-of-{}", layout, k, n);
                r = ember(common + fmt::format(" --shard {}/{} --out {}", k, n, shell_quote(shard.string())));
                REQUIRE_MESSAGE(r.exit_code == 0, r.output);
                merge += " " + shell_quote(shard.string());
            }
            r = ember(merge + " --overwrite --out " + shell_quote(full.string()));
            REQUIRE_MESSAGE(r.exit_code == 0, r.output);
            CHECK_MESSAGE(differing_files(full, reference).empty(), differing_files(full, reference));
            r = ember("verify " + shell_quote(full.string()));
            CHECK_MESSAGE(r.exit_code == 0, r.output);
            const json::array entries = manifest(full).at("sae_features").as_array();
            REQUIRE(entries.size() == std::size(kMergeSaes));
            for (std::size_t i = 0; i < entries.size(); ++i) {
                CHECK(entries[i].at("sae").at("name") == kMergeSaes[i]);
                CHECK(entries[i].at("layout") == layout);
            }
        }
    }
}

TEST_CASE("smoke: ember merge refuses shards that read different SAEs, naming them, and writes nothing") {
    TempDir dir;
    const fs::path saes = write_fixtures(dir.path(), "synth-llama3-q8_0");
    const fs::path data = write_dataset(dir.path());
    const auto shard = [&](std::size_t k, const char* sae) {
        const fs::path out = dir.path() / fmt::format("shard-{}", k);
        const CommandResult r =
            ember(fmt::format("extract --model {} --dataset {} --layers 1 --batch-tokens 8 --sae {} --shard {}/2 --out {}",
                              shell_quote(model_path("synth-llama3-q8_0")), shell_quote(data.string()),
                              shell_quote((saes / sae).string()), k, shell_quote(out.string())));
        REQUIRE_MESSAGE(r.exit_code == 0, r.output);
        return out;
    };
    const fs::path a = shard(0, "v6-standard"), b = shard(1, "v6-topk");
    const fs::path out = dir.path() / "merged";
    const CommandResult r = ember("merge " + shell_quote(a.string()) + " " + shell_quote(b.string()) + " --out " +
                                  shell_quote(out.string()));
    CHECK(r.exit_code == 1);
    CHECK_MESSAGE(r.output.find("sae_features[0]") != std::string::npos, r.output);
    CHECK_MESSAGE(r.output.find("v6-topk") != std::string::npos, r.output);
    CHECK_FALSE(fs::exists(out));
}

TEST_CASE("smoke: ember run with [[sae]] and [output] extract = true writes the features ember extract --sae writes") {
    TempDir dir;
    const fs::path saes = write_fixtures(dir.path(), "synth-llama3-q8_0");
    const std::string prompt = "hello world, the features of a prompt";
    // In this process, and (with an experiment loaded) in a supervised worker, which rebuilds the config.
    for (const auto& run : {std::pair{"dense", false}, {"sparse", false}, {"sparse", true}}) {
        const char* const layout = run.first;  // not structured bindings: clang 14 cannot capture those (CAPTURE)
        const bool worker = run.second;
        CAPTURE(layout);
        CAPTURE(worker);
        const std::string tag = std::string(layout) + (worker ? "-worker" : "");
        const fs::path extracted = dir.path() / ("extract-" + tag);
        const fs::path ran = dir.path() / ("run-" + tag);
        CommandResult r = ember(fmt::format(
            "extract --model {} --prompt {} --stages after_layer --layers 1 --sae {} --sae {} --sae-output {} --out {}",
            shell_quote(model_path("synth-llama3-q8_0")), shell_quote(prompt),
            shell_quote((saes / "v6-standard").string()), shell_quote((saes / "v6-transcoder").string()), layout,
            shell_quote(extracted.string())));
        REQUIRE_MESSAGE(r.exit_code == 0, r.output);
        const fs::path config = dir.path() / ("run-" + tag + ".toml");
        write_all(config, fmt::format("[model]\npath = {}\n[prompt]\ntext = {}\n[generation]\nmax_tokens = 3\n"
                                      "[output]\ndir = {}\nextract = true\nstages = [\"after_layer\"]\nlayers = [1]\n"
                                      "sae_output = \"{}\"\n[[sae]]\npath = {}\n[[sae]]\npath = {}\n",
                                      json::serialize(json::value(model_path("synth-llama3-q8_0"))),
                                      json::serialize(json::value(prompt)), json::serialize(json::value(ran.string())),
                                      layout, json::serialize(json::value((saes / "v6-standard").string())),
                                      json::serialize(json::value((saes / "v6-transcoder").string()))));
        if (worker)
            write_all(config, read_all(config) + fmt::format("[[experiment]]\nplugin = {}\n",
                                                             json::serialize(json::value(
                                                                 std::string(EMBER_BUILTIN_PLUGIN_DIR) + "/libfinite-check.so"))));
        r = ember("run " + shell_quote(config.string()));
        REQUIRE_MESSAGE(r.exit_code == 0, r.output);
        r = ember("verify " + shell_quote(ran.string()));
        CHECK_MESSAGE(r.exit_code == 0, r.output);
        std::size_t compared = 0;
        for (const auto& e : fs::directory_iterator(extracted)) {
            const std::string name = e.path().filename().string();
            if (!name.starts_with("sae_features.")) continue;
            INFO(name);
            REQUIRE(fs::exists(ran / name));
            CHECK(read_all(e.path()) == read_all(ran / name));
            ++compared;
        }
        CHECK(compared == (std::string_view(layout) == "dense" ? 2 : 6));
        CHECK(json::serialize(manifest(ran).at("sae_features")) == json::serialize(manifest(extracted).at("sae_features")));
        CHECK(read_all(ran / "after_layer.layer1.npy") == read_all(extracted / "after_layer.layer1.npy"));
    }
}

TEST_CASE("activation-reference: an SAE at before_logits (model.norm) on Llama, Qwen3 and Gemma 4") {
    for (const char* model : {"synth-llama3-q8_0", "synth-qwen3-q8_0", "synth-gemma4-q8_0"}) {
        CAPTURE(model);
        TempDir dir;
        const fs::path saes = write_fixtures(dir.path(), model);
        const fs::path sae = with_hook(saes / "v6-standard", dir.path() / "final-norm", "model.norm");
        const fs::path run = dir.path() / "run";
        CommandResult r = ember(fmt::format("extract --model {} --prompt {} --stages before_logits --select 1,2,3,-1 "
                                            "--sae {} --out {}",
                                            shell_quote(model_path(model)), shell_quote("hello world, the final norm"),
                                            shell_quote(sae.string()), shell_quote(run.string())));
        REQUIRE_MESSAGE(r.exit_code == 0, r.output);
        r = ember("verify " + shell_quote(run.string()));
        CHECK_MESSAGE(r.exit_code == 0, r.output);
        const json::object run_manifest = manifest(run);
        const json::object& entry = run_manifest.at("sae_features").as_array().at(0).as_object();
        CHECK(entry.at("site") == "before_logits");
        CHECK(entry.at("layer").is_null());
        CHECK(entry.at("shape").as_array()[0] == 4);
        check_against_reference(run, 0, sae, run / "before_logits.npy", dir.path());

        // A dataset: the reference holds, and packed equals one sample at a time.
        const fs::path data = write_dataset(dir.path());
        const std::string common = fmt::format("extract --model {} --dataset {} --stages before_logits --sae {}",
                                               shell_quote(model_path(model)), shell_quote(data.string()),
                                               shell_quote(sae.string()));
        const fs::path packed = dir.path() / "packed", alone = dir.path() / "alone";
        r = ember(common + " --batch-tokens 4096 --out " + shell_quote(packed.string()));
        REQUIRE_MESSAGE(r.exit_code == 0, r.output);
        r = ember(common + " --batch-tokens 1 --out " + shell_quote(alone.string()));
        REQUIRE_MESSAGE(r.exit_code == 0, r.output);
        CHECK(read_all(packed / "sae_features.sae0.npy") == read_all(alone / "sae_features.sae0.npy"));
        CHECK(npy::read(packed / "sae_features.sae0.npy").shape[0] == npy::read(packed / "before_logits.npy").shape[0]);
        check_against_reference(packed, 0, sae, packed / "before_logits.npy", dir.path());
    }
}

}  // namespace ember::test
