// Rung: smoke. --overwrite and [output] overwrite replace only what Ember wrote (issue 24):
// a directory holding the run's own inputs or no Ember run is refused by name and left
// whole; a replaced Ember run's files that the run did not write (a user's notes) are
// moved aside into DIR.user-files-TIMESTAMP and named, by ember extract, ember run and a
// sweep replacing a stale result; `ember merge --overwrite` never deletes foreign files or
// its own shards, and refuses an --out inside a shard. On the code before this suite each
// of these deleted the files (the model and config beside `[output] dir = "."`, the
// user's notes, the shards) or wrote into the shard.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <vector>

#include "support/files.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

CommandResult ember_in(const fs::path& dir, const std::string& arguments) {
    return run_command(fmt::format("cd {} && env -u EMBER_DEFAULTS XDG_CONFIG_HOME={} {} {} 2>&1",
                                   shell_quote(dir.string()), shell_quote((dir / "xdg").string()),
                                   shell_quote(EMBER_BINARY), arguments));
}

std::string model() { return fixture_path("models/stories260K.gguf").string(); }

std::string extract_args(const std::string& out, const std::string& extra = "") {
    return fmt::format("extract --model {} --prompt 'Once upon a time' --threads 1 --layers 0 --out {} {}",
                       shell_quote(model()), shell_quote(out), extra);
}

std::string run_toml(const std::string& model_path, const std::string& output_dir, int max_tokens,
                     const std::string& more = "") {
    return fmt::format("[model]\npath = '{}'\nroute = \"reference\"\nthreads = 1\n[prompt]\ntext = 'Once upon'\n"
                       "[generation]\nmax_tokens = {}\n[output]\ndir = '{}'\n{}",
                       model_path, max_tokens, output_dir, more);
}

// The one DIR.user-files-* beside `dir` (a doctest failure unless exactly one).
fs::path user_files_dir(const fs::path& dir) {
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(dir.parent_path()))
        if (e.path().filename().string().starts_with(dir.filename().string() + ".user-files-")) found.push_back(e.path());
    REQUIRE(found.size() == 1);
    return found.front();
}

// A dataset of 6 prompts run as shard K of 2 into `out`.
void run_shard(const fs::path& dir, const fs::path& dataset, const fs::path& out, int k) {
    const CommandResult r = ember_in(dir, fmt::format("extract --model {} --dataset {} --out {} --threads 1 --layers 0 "
                                                      "--shard {}/2",
                                                      shell_quote(model()), shell_quote(dataset.string()),
                                                      shell_quote(out.string()), k));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
}

}  // namespace

TEST_CASE("[output] dir = \".\" with overwrite never deletes the model, the config or the notes beside them") {
    TempDir dir;
    fs::copy_file(model(), dir.path() / "model.gguf");
    write_all(dir.path() / "notes.md", "my notes\n");
    // An earlier run's record in the directory too: it is an Ember run, and still refused.
    write_all(dir.path() / "run.json", "{\"kind\": \"ember.run\", \"run_id\": \"20260101T000000Z-00000000\"}\n");
    write_all(dir.path() / "run.toml", run_toml((dir.path() / "model.gguf").string(), ".", 1, "overwrite = true\n"));
    const CommandResult r = ember_in(dir.path(), "run run.toml");
    CHECK(r.exit_code == 1);
    CHECK_MESSAGE(r.output.find("holds " + (dir.path() / "model.gguf").string() + ", an input of this run") !=
                      std::string::npos,
                  r.output);
    CHECK(fs::file_size(dir.path() / "model.gguf") == fs::file_size(model()));
    CHECK(read_all(dir.path() / "notes.md") == "my notes\n");
    CHECK(fs::exists(dir.path() / "run.toml"));

    // The same through ember extract --overwrite, the prompt file being the input inside.
    write_all(dir.path() / "prompt.txt", "Once upon a time");
    const CommandResult e = ember_in(dir.path(), fmt::format("extract --model {} --file prompt.txt --out . --overwrite",
                                                             shell_quote(model())));
    CHECK(e.exit_code == 1);
    CHECK_MESSAGE(e.output.find("prompt.txt, an input of this run") != std::string::npos, e.output);
    CHECK(read_all(dir.path() / "notes.md") == "my notes\n");
    CHECK(fs::exists(dir.path() / "prompt.txt"));
}

TEST_CASE("--overwrite refuses a directory that holds no Ember run, naming a file in it") {
    TempDir dir;
    fs::create_directories(dir.path() / "project" / "src");
    write_all(dir.path() / "project" / "notes.md", "my notes\n");
    write_all(dir.path() / "project" / "src" / "main.c", "int main() {}\n");
    const CommandResult r = ember_in(dir.path(), extract_args("project", "--overwrite"));
    CHECK(r.exit_code == 1);
    CHECK_MESSAGE(r.output.find("holds files of no Ember run ('notes.md' and 1 more)") != std::string::npos, r.output);
    CHECK(read_all(dir.path() / "project" / "notes.md") == "my notes\n");
    CHECK(read_all(dir.path() / "project" / "src" / "main.c") == "int main() {}\n");
}

TEST_CASE("replacing an Ember run moves the files its run did not write aside and names them") {
    TempDir dir;
    REQUIRE(ember_in(dir.path(), extract_args("out")).exit_code == 0);
    write_all(dir.path() / "out" / "analysis.md", "what I found\n");
    fs::create_directories(dir.path() / "out" / "plots");
    write_all(dir.path() / "out" / "plots" / "a.svg", "<svg/>\n");
    const CommandResult r = ember_in(dir.path(), extract_args("out", "--overwrite"));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    const fs::path aside = user_files_dir(dir.path() / "out");
    CHECK(read_all(aside / "analysis.md") == "what I found\n");
    CHECK(read_all(aside / "plots" / "a.svg") == "<svg/>\n");
    CHECK_MESSAGE(r.output.find("moved 2 files the replaced run did not write into " + aside.string() +
                                ": analysis.md, plots/a.svg") != std::string::npos,
                  r.output);
    CHECK_FALSE(fs::exists(dir.path() / "out" / "analysis.md"));
    CHECK(ember_in(dir.path(), "verify out").exit_code == 0);  // the new run, sealed, alone
}

TEST_CASE("a sweep replacing a stale run moves the user's analysis.md aside instead of deleting it") {
    TempDir dir;
    write_all(dir.path() / "a.toml", run_toml(model(), "runs/a", 1));
    REQUIRE(ember_in(dir.path(), "sweep a.toml").exit_code == 0);
    write_all(dir.path() / "runs" / "a" / "analysis.md", "what I found\n");
    write_all(dir.path() / "a.toml", run_toml(model(), "runs/a", 2));  // stale now
    const CommandResult r = ember_in(dir.path(), "sweep a.toml");
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    CHECK_MESSAGE(r.output.find("1 ok") != std::string::npos, r.output);
    const fs::path aside = user_files_dir(dir.path() / "runs" / "a");
    CHECK(read_all(aside / "analysis.md") == "what I found\n");
    CHECK_MESSAGE(r.output.find("moved 1 file the replaced run did not write into " + aside.string() +
                                ": analysis.md") != std::string::npos,
                  r.output);

    // A sweep never replaces a directory of no Ember run either.
    fs::create_directories(dir.path() / "runs" / "b");
    write_all(dir.path() / "runs" / "b" / "notes.md", "mine\n");
    write_all(dir.path() / "b.toml", run_toml(model(), "runs/b", 1));
    const CommandResult b = ember_in(dir.path(), "sweep b.toml");
    CHECK(b.exit_code == 1);
    CHECK_MESSAGE(b.output.find("holds files of no Ember run ('notes.md')") != std::string::npos, b.output);
    CHECK(read_all(dir.path() / "runs" / "b" / "notes.md") == "mine\n");
}

TEST_CASE("ember merge --overwrite keeps foreign files and its own shards, and refuses an --out inside a shard") {
    TempDir dir;
    std::string lines;
    for (const char* text : {"Once upon a time", "كتب الطالب الدرس", "The cat sat", "سلام", "He ran home", "The end"})
        lines += fmt::format("{{\"text\": \"{}\"}}\n", text);
    const fs::path dataset = dir.path() / "d.jsonl";
    write_all(dataset, lines);
    const fs::path s0 = dir.path() / "s0", s1 = dir.path() / "s1";
    run_shard(dir.path(), dataset, s0, 0);
    run_shard(dir.path(), dataset, s1, 1);
    const std::string shards = fmt::format("{} {}", shell_quote(s0.string()), shell_quote(s1.string()));

    // Foreign files in --out.
    fs::create_directories(dir.path() / "P");
    write_all(dir.path() / "P" / "unrelated.txt", "mine\n");
    const CommandResult foreign = ember_in(dir.path(), fmt::format("merge {} --out P --overwrite", shards));
    CHECK(foreign.exit_code == 1);
    CHECK_MESSAGE(foreign.output.find("holds files of no Ember run ('unrelated.txt')") != std::string::npos,
                  foreign.output);
    CHECK(read_all(dir.path() / "P" / "unrelated.txt") == "mine\n");

    // --out inside a shard: the sealed shard would change.
    const CommandResult inside = ember_in(dir.path(), fmt::format("merge {} --out s0/merged", shards));
    CHECK(inside.exit_code == 1);
    CHECK_MESSAGE(inside.output.find("lies inside the shard " + s0.string()) != std::string::npos, inside.output);
    CHECK_FALSE(fs::exists(s0 / "merged"));
    CHECK(ember_in(dir.path(), "verify s0").exit_code == 0);

    // --out holding the shards: replacing it would delete the merge's own inputs.
    fs::create_directories(dir.path() / "Q");
    fs::rename(s0, dir.path() / "Q" / "s0");
    fs::rename(s1, dir.path() / "Q" / "s1");
    const CommandResult own = ember_in(dir.path(), "merge Q/s0 Q/s1 --out Q --overwrite");
    CHECK(own.exit_code == 1);
    CHECK_MESSAGE(own.output.find("holds the shard " + (dir.path() / "Q" / "s0").string()) != std::string::npos,
                  own.output);
    CHECK(ember_in(dir.path(), "verify Q/s0").exit_code == 0);
    CHECK(ember_in(dir.path(), "verify Q/s1").exit_code == 0);

    // And the merge itself still works beside them.
    const CommandResult ok = ember_in(dir.path(), "merge Q/s0 Q/s1 --out merged");
    CHECK_MESSAGE(ok.exit_code == 0, ok.output);
}

}  // namespace ember::test
