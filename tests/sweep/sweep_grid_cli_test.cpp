// Rung: smoke. `ember sweep` on grid files as a user runs it: --list prints the expansion;
// on a terminal the progress line names each grid run as it starts;
// --shard K/N puts every run in exactly one shard for N = 1..7, the same every time; a
// grid sweep's summary has one column per grid key; the shards' outputs collected with
// --collect give the local sweep's table (but for the columns that say when and how fast);
// --slurm writes scripts that run the shards and the summary (run here by bash, without
// Slurm), and --submit hands them to sbatch with an afterok dependency (a stand-in sbatch
// on PATH records what it was asked). The real cluster is scripts/test-slurm.sh.
// Rung: interventions. The patching grid of docs/sweep.md (configs/patching/) runs its 50
// runs; patching the last layer at the last position gives the clean run's logits bit
// for bit, patching position 0 (BOS, the same in both prompts) changes nothing.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <boost/json.hpp>

#include <map>
#include <set>
#include <sstream>

#include "run/ember_run.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

// 4 layers x 3 seeds (12 runs) or 2 layers x an English/Arabic prompt pair (4 runs).
std::string grid_file(bool small) {
    std::string out = fmt::format(
        "[model]\npath = {}\nthreads = 1\n[prompt]\ntext = 'Once upon a time'\n[generation]\nmax_tokens = 2\n"
        "[output]\nextract = true\n\n[grid]\n",
        toml_literal(fixture_path("models/stories260K.gguf").string()));
    if (!small) return out + "\"output.layers\" = [[0], [1], [2], [4]]\n\"generation.seed\" = [1, 2, 3]\n";
    return out + "\"output.layers\" = [[0], [3]]\n[[grid.zip]]\n"
                 "\"prompt.text\" = ['Once upon a time', 'ذهب الولد إلى المدرسة']\n\"generation.max_tokens\" = [2, 3]\n";
}

CommandResult ember(const std::string& arguments, const std::string& env = "") {
    return run_command(fmt::format("cd /tmp && env -u EMBER_DEFAULTS XDG_CONFIG_HOME=/nonexistent {} {} sweep {} 2>&1",
                                   env, shell_quote(EMBER_BINARY), arguments));
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (!line.starts_with("ember sweep:")) out.push_back(line);
    return out;
}

// configs/patching/NAME.toml copied into `dir` (as configs/patching/NAME.toml), its model and
// plugins pointed at the fixtures and this build.
void copy_example(const fs::path& dir, const std::string& name) {
    std::string text = read_text(fs::path(EMBER_SOURCE_DIR) / "configs" / "patching" / (name + ".toml"));
    const auto replace = [&](const std::string& from, const std::string& to) {
        const std::size_t at = text.find(from);
        REQUIRE_MESSAGE(at != std::string::npos, from);
        text.replace(at, from.size(), to);
    };
    replace("\"../../../shared/fixtures/models/stories260K.gguf\"",
            toml_literal(fixture_path("models/stories260K.gguf").string()));
    replace("\"../../build/plugins/", fmt::format("\"{}/", EMBER_BUILTIN_PLUGIN_DIR));
    fs::create_directories(dir / "configs" / "patching");
    write_text(dir / "configs" / "patching" / (name + ".toml"), text);
}

// The summary rows without the columns that say when and how fast a run ran.
json::array stable_rows(const fs::path& summary) {
    json::array rows = json::parse(read_text(summary)).as_array();
    for (auto& row : rows)
        for (const char* key : {"run_id", "model_shared", "load_ms", "prefill_ms", "decode_ms", "total_ms"})
            row.as_object().erase(key);
    return rows;
}

}  // namespace

TEST_CASE("ember sweep --list --shard: every run in exactly one shard for N = 1..7, the same every time") {
    TempDir dir;
    const fs::path grid = dir.path() / "grid.toml";
    write_text(grid, grid_file(false));
    const CommandResult all = ember("--list " + shell_quote(grid.string()));
    REQUIRE(all.exit_code == 0);
    const std::vector<std::string> runs = lines_of(all.output);
    REQUIRE(runs.size() == 12);
    CHECK(runs[0].find("seed=1,layers=0  -> " + (dir.path() / "runs" / "grid" / "seed=1,layers=0").string()) !=
          std::string::npos);
    CHECK(runs[11].find("seed=3,layers=4") != std::string::npos);
    CHECK(ember("--list " + shell_quote(grid.string())).output == all.output);

    for (std::size_t n = 1; n <= 7; ++n) {
        CAPTURE(n);
        std::vector<std::string> joined;
        std::size_t smallest = runs.size(), largest = 0;
        for (std::size_t k = 0; k < n; ++k) {
            const CommandResult shard = ember(fmt::format("--list --shard {}/{} {}", k, n, shell_quote(grid.string())));
            REQUIRE(shard.exit_code == 0);
            const std::vector<std::string> mine = lines_of(shard.output);
            joined.insert(joined.end(), mine.begin(), mine.end());
            smallest = std::min(smallest, mine.size());
            largest = std::max(largest, mine.size());
        }
        CHECK(joined == runs);  // each run once, in order: the shards are contiguous slices
        CHECK(largest - smallest <= 1);
    }
    for (const char* bad : {"7/7", "1/0", "x/2", "1", "-1/2", "0/100001"})
        CHECK(ember(fmt::format("--list --shard {} {}", bad, shell_quote(grid.string()))).exit_code == 2);
}

TEST_CASE("ember sweep on a grid: one summary column per key, and shards collected give the local table") {
    TempDir dir;
    const fs::path grid = dir.path() / "grid.toml";
    write_text(grid, grid_file(true));
    const fs::path local = dir.path() / "local.json";
    const CommandResult r = ember(fmt::format("{} --summary {}", shell_quote(grid.string()), shell_quote(local.string())));
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("4 runs: 4 ok, 0 failed, 0 skipped") != std::string::npos);
    const json::array rows = json::parse(read_text(local)).as_array();
    REQUIRE(rows.size() == 4);
    std::vector<std::string> columns;
    for (const auto& kv : rows[1].as_object()) columns.push_back(kv.key());
    REQUIRE(columns.size() >= 5);
    CHECK(std::vector<std::string>(columns.begin(), columns.begin() + 6) ==
          std::vector<std::string>{"config", "name", "generation.max_tokens", "output.layers", "prompt.text", "outcome"});
    CHECK(rows[1].at("prompt.text") == "ذهب الولد إلى المدرسة");
    CHECK(rows[1].at("output.layers") == json::array{0});
    CHECK(rows[1].at("generated_tokens").to_number<int>() == 3);
    CHECK(str(rows[1].at("output_dir")) == (dir.path() / "runs" / "grid" / str(rows[1].at("name"))).string());
    const std::string csv_path = (dir.path() / "local.csv").string();
    CHECK(ember(fmt::format("{} --summary {}", shell_quote(grid.string()), shell_quote(csv_path))).output.find(
              "4 runs: 0 ok, 0 failed, 4 skipped") != std::string::npos);  // the same skip rules as configs
    CHECK(read_text(csv_path).starts_with("config,name,generation.max_tokens,output.layers,prompt.text,outcome,"));

    // The same grid again in two shards, then collected.
    fs::rename(dir.path() / "runs", dir.path() / "local-runs");
    const fs::path collected = dir.path() / "collected.json";
    const CommandResult none = ember(fmt::format("--collect {} --summary {}", shell_quote(grid.string()),
                                                 shell_quote(collected.string())));
    CHECK(none.exit_code == 1);
    CHECK(none.output.find("no result in " + (dir.path() / "runs" / "grid").string()) != std::string::npos);
    for (const char* shard : {"1/2", "0/2"}) {
        const CommandResult s = ember(fmt::format("--shard {} {}", shard, shell_quote(grid.string())));
        CHECK(s.exit_code == 0);
        CHECK(s.output.find("2 runs: 2 ok") != std::string::npos);
    }
    const CommandResult c = ember(fmt::format("--collect {} --summary {}", shell_quote(grid.string()),
                                              shell_quote(collected.string())));
    CHECK(c.exit_code == 0);
    CHECK(stable_rows(collected) == stable_rows(local));
    // The arrays too, bit for bit.
    for (const auto& row : rows) {
        const fs::path out(str(row.at("output_dir")));
        const std::string array = fmt::format("after_layer.layer{}.npy", row.at("output.layers").as_array()[0].as_int64());
        CHECK(read_text(out / array) == read_text(dir.path() / "local-runs" / "grid" / out.filename() / array));
    }
}

TEST_CASE("ember sweep on a terminal: the progress line names the grid run it started, not the grid file") {
    TempDir dir;
    const fs::path grid = dir.path() / "grid.toml";
    write_text(grid, grid_file(true));
    // script(1) gives the sweep a terminal: the progress line is drawn only there.
    const std::string sweep = fmt::format("{} sweep {}", shell_quote(EMBER_BINARY), shell_quote(grid.string()));
    const CommandResult r = run_command(fmt::format(
        "cd /tmp && env -u EMBER_DEFAULTS XDG_CONFIG_HOME=/nonexistent script -qec {} /dev/null 2>&1", shell_quote(sweep)));
    CHECK_MESSAGE(r.exit_code == 0, r.output);
    CHECK_MESSAGE(r.output.find("[4/4] 4 ok, 0 failed, 0 skipped; last started max_tokens=") != std::string::npos, r.output);
    CHECK_MESSAGE(r.output.find("last started grid.toml") == std::string::npos, r.output);
}

TEST_CASE("ember sweep --slurm: the scripts run the shards and the summary, --submit chains them with afterok") {
    TempDir dir;
    const fs::path grid = dir.path() / "grid.toml";
    write_text(grid, grid_file(true));
    const fs::path slurm = dir.path() / "slurm";
    const CommandResult w = ember(fmt::format("--slurm --shards 2 --slurm-dir {} --slurm-opt=--time=5 "
                                              "--slurm-opt=--partition=short {}",
                                              shell_quote(slurm.string()), shell_quote(grid.string())));
    REQUIRE(w.exit_code == 0);
    const std::string sweep = read_text(slurm / "sweep.sbatch");
    const std::string summary = read_text(slurm / "summary.sbatch");
    CHECK(sweep.starts_with("#!/bin/bash\n"));
    CHECK(sweep.find("#SBATCH --array=0-1\n") != std::string::npos);
    CHECK(sweep.find("#SBATCH --time=5\n#SBATCH --partition=short\n") != std::string::npos);
    CHECK(sweep.find(fmt::format("sweep --shard \"$SLURM_ARRAY_TASK_ID/2\" '{}'", grid.string())) != std::string::npos);
    CHECK(summary.find("#SBATCH --time=5\n") != std::string::npos);
    CHECK(summary.find(fmt::format("sweep --collect --summary '{}' '{}'", (slurm / "summary.csv").string(),
                                   grid.string())) != std::string::npos);

    // Each task as Slurm would start it, then the summary job.
    for (int task : {0, 1}) {
        const CommandResult t = run_command(fmt::format("cd /tmp && env -u EMBER_DEFAULTS XDG_CONFIG_HOME=/nonexistent "
                                                        "SLURM_ARRAY_TASK_ID={} bash {} 2>&1",
                                                        task, shell_quote((slurm / "sweep.sbatch").string())));
        CHECK(t.exit_code == 0);
        CHECK(t.output.find("2 runs: 2 ok") != std::string::npos);
    }
    const CommandResult s = run_command(fmt::format("cd /tmp && env -u EMBER_DEFAULTS XDG_CONFIG_HOME=/nonexistent bash {} 2>&1",
                                                    shell_quote((slurm / "summary.sbatch").string())));
    CHECK(s.exit_code == 0);
    std::istringstream csv(read_text(slurm / "summary.csv"));
    std::string header, line;
    std::getline(csv, header);
    CHECK(header.starts_with("config,name,generation.max_tokens,output.layers,prompt.text,outcome,"));
    int ok = 0;
    while (std::getline(csv, line)) ok += line.find(",ok,") != std::string::npos;
    CHECK(ok == 4);

    // A stand-in sbatch: logs its arguments, prints a job id the way --parsable does.
    const fs::path bin = dir.path() / "bin";
    fs::create_directories(bin);
    write_text(bin / "sbatch", "#!/bin/sh\necho \"$@\" >> \"$(dirname \"$0\")/calls\"\n"
                               "n=$(wc -l < \"$(dirname \"$0\")/calls\")\necho \"$((4240 + n));cluster\"\n");
    fs::permissions(bin / "sbatch", fs::perms::owner_all);
    const CommandResult submitted = ember(fmt::format("--slurm --submit --slurm-dir {} {}", shell_quote(slurm.string()),
                                                      shell_quote(grid.string())),
                                          "PATH=" + shell_quote(bin.string() + ":/usr/bin:/bin"));
    CHECK(submitted.exit_code == 0);
    CHECK(submitted.output.find("sweep job 4241 (4 tasks)\nsummary job 4242 (afterok:4241)") != std::string::npos);
    CHECK(read_text(bin / "calls") ==
          fmt::format("--parsable {0}/sweep.sbatch\n--parsable --dependency=afterok:4241 --kill-on-invalid-dep=yes "
                      "{0}/summary.sbatch\n",
                      slurm.string()));
    CHECK(read_text(slurm / "sweep.sbatch").find("#SBATCH --array=0-3\n") != std::string::npos);  // one task per run

    // sbatch missing or failing is an error, not a silent success.
    write_text(bin / "sbatch", "#!/bin/sh\necho 'sbatch: error: invalid partition' >&2\nexit 1\n");
    const CommandResult refused = ember(fmt::format("--slurm --submit --slurm-dir {} {}", shell_quote(slurm.string()),
                                                    shell_quote(grid.string())),
                                        "PATH=" + shell_quote(bin.string() + ":/usr/bin:/bin"));
    CHECK(refused.exit_code == 1);
    CHECK(refused.output.find("invalid partition") != std::string::npos);
    CHECK(refused.output.find("sbatch --parsable") != std::string::npos);

    for (const char* usage : {"--submit", "--slurm --shard 0/2", "--list --collect", "--shards 2", "--slurm --shards 0"})
        CHECK(ember(fmt::format("{} {}", usage, shell_quote(grid.string()))).exit_code == 2);
}

TEST_CASE("the patching grid of docs/sweep.md: 5 layers x 10 positions, checked where the answer is known") {
    TempDir dir;
    copy_example(dir.path(), "clean");
    copy_example(dir.path(), "grid");
    const fs::path configs = dir.path() / "configs" / "patching";
    REQUIRE(run_command(fmt::format("env -u EMBER_DEFAULTS XDG_CONFIG_HOME=/nonexistent {} run {} > /dev/null 2>&1",
                                    shell_quote(EMBER_BINARY), shell_quote((configs / "clean.toml").string())))
                .exit_code == 0);
    const fs::path summary = dir.path() / "summary.json";
    const CommandResult r = ember(fmt::format("--jobs 2 --summary {} {}", shell_quote(summary.string()),
                                              shell_quote((configs / "grid.toml").string())));
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("50 runs: 50 ok, 0 failed, 0 skipped") != std::string::npos);
    const fs::path runs = dir.path() / "runs" / "patching";
    const auto logits = [&](int layer, int position) {
        return read_text(runs / "grid" / fmt::format("layers={},positions={}", layer, position) / "logits.npy");
    };
    const std::string clean = read_text(runs / "clean" / "logits.npy");
    CHECK(logits(4, 9) == clean);  // the last layer's output at the last position decides the logits
    CHECK(logits(0, 0) != clean);  // the prompts do differ where it matters
    for (int layer = 1; layer < 5; ++layer) CHECK(logits(layer, 0) == logits(0, 0));
    const json::array rows = json::parse(read_text(summary)).as_array();
    REQUIRE(rows.size() == 50);
    CHECK(rows[13].at("experiment.patch.config.layers") == json::array{1});
    CHECK(rows[13].at("experiment.patch.config.positions") == json::array{3});
}

}  // namespace ember::test
