// Rung: smoke (provenance). Inputs are what was read: a file edited while the run reads it
// fails the run naming the file, nothing is recorded as if it had been read whole (before
// this, a dataset rewritten during the run, or a model edited while mapped, was recorded
// under its old SHA-256 and verified). The edits are made by the file-editor test plugin
// at one moment of the run (layer 0's first after_attention), so they are deterministic:
// - a dataset appended to and rewritten during `ember extract --dataset`;
// - a prompt file rewritten during `ember run`;
// - a model appended to while mapped, and a model truncated while mapped (which used to
//   kill the process with SIGBUS and no record): `ember run` exits 1 with a failed
//   run.json naming the model;
// - the mapping itself: reading a truncated file's lost pages reads zeros and marks it.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

#include "common/mapped_file.hpp"
#include "run/ember_run.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

const fs::path kModel = fixture_path("models/stories260K.gguf");

std::string editor(const fs::path& path, const char* action) {
    return experiment(test_plugin("file-editor"), fmt::format("path = {}\naction = \"{}\"", toml_literal(path.string()), action));
}

// `ember extract CONFIG` in `dir` with its own digest cache; stdout and stderr together.
CommandResult extract(const TempDir& dir, const std::string& config) {
    write_text(dir.path() / "extract.toml", config);
    return run_command(fmt::format("cd {} && env -u EMBER_DEFAULTS XDG_CONFIG_HOME=/nonexistent EMBER_DIGEST_CACHE={} {} "
                                   "extract extract.toml 2>&1",
                                   shell_quote(dir.path().string()), shell_quote((dir.path() / "digests.tsv").string()),
                                   shell_quote(EMBER_BINARY)));
}

std::string dataset_config(const std::string& more) {
    return fmt::format("[model]\npath = {}\nroute = \"reference\"\nthreads = 1\n\n[dataset]\npath = \"samples.jsonl\"\n"
                       "select = \"all\"\n\n[output]\ndir = \"out\"\nstages = [\"after_layer\"]\nlayers = [0]\n\n{}",
                       toml_literal(kModel.string()), more);
}

}  // namespace

TEST_CASE("live inputs: a dataset appended to or rewritten during the run fails it, naming the dataset") {
    for (const char* action : {"append", "rewrite"}) {
        CAPTURE(std::string(action));
        TempDir dir;
        const fs::path samples = dir.path() / "samples.jsonl";
        write_text(samples, "{\"text\": \"Once upon a time\"}\n{\"text\": \"there was a little girl\"}\n");
        const CommandResult r = extract(dir, dataset_config(editor(samples, action)));
        CHECK(r.exit_code == 1);
        CHECK_MESSAGE(r.output.find(fmt::format("{}: the dataset changed during the run", samples.string())) != std::string::npos,
                      r.output);
        CHECK_FALSE(fs::exists(dir.path() / "out" / "manifest.json"));
    }
    // the same run without the edit is recorded (the check does not refuse a quiet file)
    TempDir dir;
    write_text(dir.path() / "samples.jsonl", "{\"text\": \"Once upon a time\"}\n");
    const CommandResult r = extract(dir, dataset_config(""));
    CHECK_MESSAGE(r.exit_code == 0, r.output);
    CHECK(fs::exists(dir.path() / "out" / "manifest.json"));
}

TEST_CASE("live inputs: a prompt file rewritten during ember run fails it, naming the file") {
    TempDir dir;
    const fs::path prompt = dir.path() / "prompt.txt";
    write_text(prompt, "Once upon a time, there was a little girl");
    std::string config = run_config(kModel, "unused", 2, editor(prompt, "rewrite"));
    config.replace(config.find("text = 'unused'"), std::string("text = 'unused'").size(),
                   "file = " + toml_literal(prompt.string()));
    const EmberRun run = ember_run(dir, config);
    CHECK(run.exit_code == 1);
    CHECK_MESSAGE(run.err.find(fmt::format("{}: the prompt_file changed during the run", prompt.string())) != std::string::npos,
                  run.err);
    REQUIRE(run.has_report);
    CHECK(run.report.at("outcome") == "failed");
    CHECK_FALSE(fs::exists(run.output_dir / "manifest.json"));
}

TEST_CASE("live inputs: a model edited or truncated while mapped fails ember run with a failed run.json naming it") {
    for (const char* action : {"append", "truncate"}) {
        CAPTURE(std::string(action));
        TempDir dir;
        const fs::path model = dir.path() / "model.gguf";
        fs::copy_file(kModel, model);
        const EmberRun run = ember_run(dir, run_config(model, "Once upon a time", 3, editor(model, action)));
        CHECK(run.exit_code == 1);
        const std::string expected = std::string(action) == "truncate"
                                         ? fmt::format("{}: the model file was truncated while the run read it", model.string())
                                         : fmt::format("{}: the model changed during the run", model.string());
        CHECK_MESSAGE(run.err.find(expected) != std::string::npos, run.err);
        REQUIRE_MESSAGE(run.has_report, run.err);
        CHECK(run.report.at("outcome") == "failed");
        CHECK(std::string(run.report.at("error").as_string()).find(expected) != std::string::npos);
        CHECK_FALSE(fs::exists(run.output_dir / "manifest.json"));
    }
}

TEST_CASE("live inputs: reading a mapping whose file was truncated reads zeros and marks it, no SIGBUS") {
    TempDir dir;
    const fs::path file = dir.path() / "three-pages.bin";
    const long page = ::sysconf(_SC_PAGESIZE);
    write_text(file, std::string(static_cast<std::size_t>(3 * page), 'x'));
    MappedFile mapping(file);
    CHECK(static_cast<char>(mapping.bytes()[0]) == 'x');  // the first page is in
    CHECK_FALSE(mapping.truncated());
    fs::resize_file(file, static_cast<std::uintmax_t>(page));
    CHECK(static_cast<char>(mapping.bytes()[0]) == 'x');                         // still in the file
    const auto lost = static_cast<std::size_t>(page + 5);
    CHECK(static_cast<int>(mapping.bytes()[lost]) == 0);                          // gone: zeros, not SIGBUS
    CHECK(static_cast<int>(mapping.bytes()[static_cast<std::size_t>(3 * page - 1)]) == 0);
    CHECK(mapping.truncated());
    CHECK(mapping.truncated_at() == lost);
    // a mapping of another file is not marked
    const fs::path other = dir.path() / "other.bin";
    write_text(other, "abc");
    const MappedFile intact(other);
    CHECK(static_cast<char>(intact.bytes()[2]) == 'c');
    CHECK_FALSE(intact.truncated());
}

}  // namespace ember::test
