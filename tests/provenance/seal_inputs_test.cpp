// Rung: smoke (provenance), through the CLI:
// - the seal covers the directory: a deleted or flipped capture array fails `ember verify`
//   (of the run directory and of the capture directory, which has its own sealed
//   manifest) and makes `ember sweep` run the config again; capture refuses, by name, a
//   dir that is the run directory itself or lies outside it;
// - results are keyed on their inputs' content: run.json and the manifest record every
//   input (model, prompt file, defaults file, plugins, a steering vector, a patch source
//   by its run id and seal); a sweep re-runs when a patch source is captured again or the
//   model file is replaced at the same path, and when a file is rewritten in place with
//   its size and mtime restored (the digest cache keys on ctime too); changing threads
//   does not re-run (recorded, not hashed).
#include <doctest/doctest.h>
#include <ember/npy.hpp>
#include <fmt/format.h>

#include <boost/json.hpp>

#include "common/sha256_file.hpp"
#include "record/verify.hpp"
#include "run/ember_run.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

const fs::path kModel = fixture_path("models/stories260K.gguf");
// Two prompts of one token length (a patch source must match the patched prompt's).
constexpr const char* kGirl = "Once upon a time, there was a little girl";
constexpr const char* kBoy = "Once upon a time, there was a little boy";

CommandResult verify_cli(const fs::path& dir) {
    return run_command(fmt::format("{} verify {}", EMBER_BINARY, shell_quote(dir.string())), true);
}

// `ember sweep` over `configs` with its own digest cache; the summary as JSON.
json::array sweep(const TempDir& dir, const fs::path& configs, const std::string& env = "") {
    const fs::path summary = dir.path() / "summary.json";
    const auto r = run_command(fmt::format("env -u EMBER_DEFAULTS XDG_CONFIG_HOME=/nonexistent EMBER_DIGEST_CACHE={} {} {} "
                                           "sweep --summary {} {} 2>&1",
                                           shell_quote((dir.path() / "digests.tsv").string()), env,
                                           shell_quote(EMBER_BINARY), shell_quote(summary.string()),
                                           shell_quote(configs.string())));
    INFO(r.output);
    return json::parse(read_text(summary)).as_array();
}

std::vector<std::string> outcomes(const json::array& summary) {
    std::vector<std::string> out;
    for (const auto& r : summary) out.push_back(str(r.at("outcome")));
    return out;
}

// [model] .. [output] of a sweep config writing ../runs/NAME.
std::string sweep_config(const fs::path& model, const std::string& name, const std::string& prompt, int threads = 1,
                         const std::string& more = "") {
    return fmt::format("[model]\npath = {}\nthreads = {}\nroute = \"reference\"\n[prompt]\n{}\n[generation]\nmax_tokens = 3\n"
                       "[output]\ndir = \"../runs/{}\"\n\n{}",
                       toml_literal(model.string()), threads, prompt, name, more);
}

const json::object* input_with(const json::array& inputs, const std::string& role) {
    for (const auto& i : inputs)
        if (i.at("role") == role.c_str()) return &i.as_object();
    return nullptr;
}

}  // namespace

TEST_CASE("a deleted or flipped capture array fails verify and makes the sweep run again") {
    TempDir dir;
    fs::create_directories(dir.path() / "configs");
    write_text(dir.path() / "configs" / "cap.toml",
               sweep_config(kModel, "cap", "text = 'Once upon a time'", 1, experiment(builtin_plugin("capture"))));
    CHECK(outcomes(sweep(dir, dir.path() / "configs")) == std::vector<std::string>{"ok"});
    const fs::path out = dir.path() / "runs" / "cap";
    CHECK(verify_cli(out).exit_code == 0);
    CHECK(verify_cli(out / "capture").exit_code == 0);  // capture's own sealed manifest
    const json::object manifest = json::parse(read_text(out / "manifest.json")).as_object();
    CHECK(manifest.at("files").as_object().contains("capture/after_layer.layer2.prefill.npy"));
    CHECK(manifest.at("files").as_object().contains("capture/manifest.json"));
    CHECK(outcomes(sweep(dir, dir.path() / "configs")) == std::vector<std::string>{"skipped"});

    // Deleted: verify fails (not a warning) naming it, in both directories; the sweep runs it again.
    const fs::path array = out / "capture" / "after_layer.layer2.prefill.npy";
    fs::remove(array);
    auto r = verify_cli(out);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("capture/after_layer.layer2.prefill.npy: missing (listed in the manifest)") != std::string::npos);
    CHECK(verify_cli(out / "capture").exit_code == 1);
    CHECK(outcomes(sweep(dir, dir.path() / "configs")) == std::vector<std::string>{"ok"});
    CHECK(verify_cli(out).exit_code == 0);

    // Flipped: the same.
    std::string bytes = read_text(array);
    bytes[bytes.size() - 1] ^= 0x01;
    write_text(array, bytes);
    r = verify_cli(out);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("capture/after_layer.layer2.prefill.npy: SHA-256 ") != std::string::npos);
    CHECK(outcomes(sweep(dir, dir.path() / "configs")) == std::vector<std::string>{"ok"});

    // A file added to the capture directory is unlisted: verify fails.
    write_text(out / "capture" / "notes.txt", "mine");
    r = verify_cli(out);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("capture/notes.txt: is not listed in the manifest") != std::string::npos);
}

TEST_CASE("capture's dir must lie inside the run directory, and not be the run directory itself") {
    for (const std::string& dir_value : {std::string(""), std::string("."), std::string("../elsewhere"),
                                         std::string("/tmp/ember-capture-outside")}) {
        CAPTURE(dir_value);
        TempDir dir;
        const auto run = ember_run(dir, run_config(kModel, "Once upon a time", 2,
                                                   experiment(builtin_plugin("capture"), "dir = " + toml_literal(dir_value))));
        CHECK(run.exit_code == 1);
        CHECK(run.err.find("config key 'dir' = '" + dir_value + "' is ") != std::string::npos);
        CHECK(!fs::exists(run.output_dir / "manifest.json"));
        CHECK(!fs::exists(dir.path() / "elsewhere"));
        CHECK(!fs::exists("/tmp/ember-capture-outside"));
    }
}

TEST_CASE("run.json and the manifest record every input by content") {
    TempDir dir;
    // A steering vector of n_embd zeros, a prompt file, a defaults file with an experiment.
    const std::vector<float> zeros(64, 0.0f);
    npy::write_f32(dir.path() / "v.npy", zeros.data(), {zeros.size()});
    write_text(dir.path() / "prompt.txt", "Once upon a time");
    write_text(dir.path() / "defaults.toml", experiment(builtin_plugin("finite-check")));
    const auto source = ember_run(dir, run_config(kModel, "Once upon a time", 2) + experiment(builtin_plugin("capture")),
                                  "", "", "source.toml");
    REQUIRE_MESSAGE(source.exit_code == 0, source.err);
    fs::rename(dir.path() / "out", dir.path() / "source");
    const json::object source_manifest = json::parse(read_text(dir.path() / "source" / "capture" / "manifest.json")).as_object();

    std::string config = run_config(kModel, "", 2) +
                         experiment(builtin_plugin("steer"), "vector = 'v.npy'\nstage = \"after_layer\"\nlayers = [1]") +
                         experiment(builtin_plugin("patch"), "source = 'source/capture'\nlayers = [2]\npositions = [1]");
    config.replace(config.find("text = ''"), 9, "file = 'prompt.txt'");
    const auto run = ember_run(dir, config, "", "EMBER_DEFAULTS=" + shell_quote((dir.path() / "defaults.toml").string()));
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    const json::array& inputs = run.report.at("inputs").as_array();
    const json::object manifest = json::parse(read_text(run.output_dir / "manifest.json")).as_object();
    CHECK(manifest.at("inputs") == run.report.at("inputs"));

    REQUIRE(input_with(inputs, "model"));
    CHECK(str(input_with(inputs, "model")->at("sha256")) == str(run.report.at("model").at("sha256")));
    REQUIRE(input_with(inputs, "prompt_file"));
    CHECK(str(input_with(inputs, "prompt_file")->at("path")) == (dir.path() / "prompt.txt").string());
    REQUIRE(input_with(inputs, "defaults_file"));
    std::size_t plugins = 0;
    for (const auto& i : inputs) plugins += i.at("role") == "plugin";
    CHECK(plugins == 3);  // finite-check (defaults), steer, patch
    REQUIRE(input_with(inputs, "experiment_file"));
    CHECK(str(input_with(inputs, "experiment_file")->at("path")) == (dir.path() / "v.npy").string());
    CHECK(str(input_with(inputs, "experiment_file")->at("key")) == "experiments[1].config.vector");
    const json::object* patch_source = input_with(inputs, "experiment_source");
    REQUIRE(patch_source);
    CHECK(str(patch_source->at("run_id")) == str(source.report.at("run_id")));
    CHECK(str(patch_source->at("manifest_sha256")) == str(source_manifest.at("manifest_sha256")));
    for (const auto& i : inputs) CHECK(str(i.at("sha256")).size() == 64);

    // patch's record: the source by run id and seal, and the rows it wrote.
    const json::object record = json::parse(read_text(run.output_dir / "patch.json")).as_object();
    CHECK(record.at("kind") == "ember.patch");
    CHECK(record.at("complete") == true);
    CHECK(str(record.at("source").at("run_id")) == str(source.report.at("run_id")));
    CHECK(str(record.at("source").at("manifest_sha256")) == str(source_manifest.at("manifest_sha256")));
    // One row (position 1) in prefill at layer 2; decode steps hold no position 1.
    std::int64_t prefill_rows = -1, total_rows = 0;
    for (const auto& row : record.at("rows_written").as_array()) {
        CHECK(str(row.at("stage")) == "after_layer");
        CHECK(row.at("layer") == 2);
        total_rows += row.at("rows").to_number<std::int64_t>();
        if (row.at("phase") == "prefill") prefill_rows = row.at("rows").to_number<std::int64_t>();
    }
    CHECK(prefill_rows == 1);
    CHECK(total_rows == 1);
    CHECK(record::verify_run_directory(run.output_dir).ok());
}

TEST_CASE("a file an experiment reads through the host is an input, by the digest of the bytes it got") {
    // Plugin ABI 1.4's read_input: the file-reader plugin reads files no config string
    // names (a directory without a manifest, and names joined by a comma), in the worker.
    TempDir dir;
    fs::create_directories(dir.path() / "vectors");
    write_text(dir.path() / "vectors" / "a.bin", std::string("\x00\x01جذر\xff", 10));
    write_text(dir.path() / "vectors" / "b.txt", "كتب\n");
    const std::string reader = experiment(test_plugin("file-reader"),
                                          fmt::format("dir = {}\nnames = \"a.bin,b.txt\"",
                                                      toml_literal((dir.path() / "vectors").string())));
    const auto run = ember_run(dir, run_config(kModel, "Once upon a time", 2) + reader);
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    const json::array& inputs = run.report.at("inputs").as_array();
    std::vector<const json::object*> read;
    for (const auto& i : inputs)
        if (i.at("role") == "experiment_read") read.push_back(&i.as_object());
    REQUIRE(read.size() == 2);
    CHECK(str(read[0]->at("path")) == (dir.path() / "vectors" / "a.bin").string());
    CHECK(str(read[0]->at("sha256")) == sha256_hex(read_text(dir.path() / "vectors" / "a.bin")));
    CHECK(read[0]->at("bytes") == 10);
    CHECK(str(read[0]->at("key")) == "experiments[0]");
    CHECK(str(read[1]->at("path")) == (dir.path() / "vectors" / "b.txt").string());
    CHECK(str(read[1]->at("sha256")) == sha256_hex(std::string("كتب\n")));
    CHECK(!input_with(inputs, "experiment_file"));  // no config string names a file
    const json::object manifest = json::parse(read_text(run.output_dir / "manifest.json")).as_object();
    CHECK(manifest.at("inputs") == run.report.at("inputs"));
    CHECK(record::verify_run_directory(run.output_dir).ok());

    // A file the host cannot read fails the experiment with the host's reason, naming it.
    TempDir missing;
    const auto failed = ember_run(missing, run_config(kModel, "Once upon a time", 2) +
                                               experiment(test_plugin("file-reader"),
                                                          fmt::format("dir = {}\nnames = \"nowhere.bin\"",
                                                                      toml_literal(missing.path().string()))));
    CHECK(failed.exit_code == 1);
    CHECK_MESSAGE(failed.err.find((missing.path() / "nowhere.bin").string()) != std::string::npos, failed.err);

    // A sweep skips the run while the file is what it read, and runs it again once it is not.
    fs::create_directories(dir.path() / "configs");
    write_text(dir.path() / "configs" / "r.toml", sweep_config(kModel, "r", "text = 'Once upon a time'", 1, reader));
    CHECK(outcomes(sweep(dir, dir.path() / "configs")) == std::vector<std::string>{"ok"});
    CHECK(outcomes(sweep(dir, dir.path() / "configs")) == std::vector<std::string>{"skipped"});
    write_text(dir.path() / "vectors" / "b.txt", "درس\n");
    CHECK(outcomes(sweep(dir, dir.path() / "configs")) == std::vector<std::string>{"ok"});
}

TEST_CASE("the sweep re-runs on a re-captured patch source and a replaced model, not on changed threads") {
    TempDir dir;
    const fs::path model = dir.path() / "model.gguf";
    fs::copy_file(kModel, model);
    // The source is captured by `ember run`; the patching grid is a sweep.
    const auto capture = [&](const std::string& prompt) {
        const auto r = ember_run(dir, run_config(model, prompt, 2) + experiment(builtin_plugin("capture")), "--overwrite", "",
                                 "source.toml");
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    };
    capture(kGirl);
    fs::create_directories(dir.path() / "grid");
    const auto grid = [&](int threads) {
        for (int layer : {1, 3})
            write_text(dir.path() / "grid" / fmt::format("l{}.toml", layer),
                       sweep_config(model, fmt::format("l{}", layer), fmt::format("text = '{}'", kBoy), threads,
                                    experiment(builtin_plugin("patch"),
                                               fmt::format("source = '../out/capture'\nlayers = [{}]", layer))));
        // And one that reads the model only.
        write_text(dir.path() / "grid" / "plain.toml", sweep_config(model, "plain", fmt::format("text = '{}'", kBoy), threads));
    };
    grid(1);
    const std::vector<std::string> ran{"ok", "ok", "ok"}, skipped{"skipped", "skipped", "skipped"};
    const std::vector<std::string> patched_ran{"ok", "ok", "skipped"};
    CHECK(outcomes(sweep(dir, dir.path() / "grid")) == ran);
    CHECK(outcomes(sweep(dir, dir.path() / "grid")) == skipped);

    // Threads change nothing a result depends on: recorded, not hashed.
    grid(2);
    const json::array same = sweep(dir, dir.path() / "grid");
    CHECK(outcomes(same) == skipped);

    // The source captured again from another prompt (same length): its seal changed.
    capture(kBoy);
    CHECK(outcomes(sweep(dir, dir.path() / "grid")) == patched_ran);
    CHECK(outcomes(sweep(dir, dir.path() / "grid")) == skipped);

    // Another model file at the same path (the source must follow it, or patch refuses it):
    // the plain config re-runs for the model alone.
    fs::remove(model);
    fs::copy_file(fixture_path("models/stories260K-f16.gguf"), model);
    capture(kBoy);
    const json::array replaced = sweep(dir, dir.path() / "grid");
    CHECK(outcomes(replaced) == ran);
    const json::object l1 = json::parse(read_text(dir.path() / "runs" / "l1" / "run.json")).as_object();
    CHECK(l1.at("threads") == 2);
    CHECK(str(input_with(l1.at("inputs").as_array(), "model")->at("sha256")) == str(l1.at("model").at("sha256")));
}

TEST_CASE("a file rewritten in place with its size and mtime restored is hashed again") {
    TempDir dir;
    write_text(dir.path() / "prompt.txt", "Once upon a time");
    fs::create_directories(dir.path() / "configs");
    write_text(dir.path() / "configs" / "p.toml", sweep_config(kModel, "p", "file = '../prompt.txt'"));
    CHECK(outcomes(sweep(dir, dir.path() / "configs")) == std::vector<std::string>{"ok"});
    CHECK(outcomes(sweep(dir, dir.path() / "configs")) == std::vector<std::string>{"skipped"});
    // The cache has the prompt's digest, keyed on its identity and state (beside the
    // model's, and the model's passed block-scale check, a "c1" line).
    const std::string cache = read_text(dir.path() / "digests.tsv");
    CHECK((cache.rfind("v1 ", 0) == 0 || cache.find("\nv1 ") != std::string::npos));

    const auto mtime = fs::last_write_time(dir.path() / "prompt.txt");
    {
        std::fstream f(dir.path() / "prompt.txt", std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(12);
        f.write("tide", 4);  // "Once upon a tide": same size
    }
    fs::last_write_time(dir.path() / "prompt.txt", mtime);
    CHECK(outcomes(sweep(dir, dir.path() / "configs")) == std::vector<std::string>{"ok"});
    const json::object report = json::parse(read_text(dir.path() / "runs" / "p" / "run.json")).as_object();
    CHECK(str(report.at("prompt").at("text")) == "Once upon a tide");
}

}  // namespace ember::test
