// Rung: smoke. `ember sweep` over a directory of run configs, one of them broken, one
// naming a missing model, one whose experiment fails: the failures are reported by name
// and the other runs finish (exit 1); the model is loaded once for the configs that
// share it while each run still tells its own experiment instances on_model_loaded; a
// verified result with the same config hash is skipped unless --force; a changed config
// or a damaged result runs again; the summary (table, CSV, JSON) lists every run; no
// progress line when stdout is not a terminal, one when it is.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <boost/json.hpp>

#include <algorithm>
#include <sstream>

#include "record/verify.hpp"
#include "run/ember_run.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

// Configs in DIR/configs, each writing to DIR/runs/NAME.
struct SweepDir {
    TempDir dir;
    fs::path configs() const { return dir.path() / "configs"; }
    void add(const std::string& name, const std::string& toml) const {
        fs::create_directories(configs());
        write_text(configs() / (name + ".toml"), toml);
    }
    fs::path out(const std::string& name) const { return dir.path() / "runs" / name; }
};

std::string good_config(const std::string& name, const std::string& prompt, int max_tokens = 3) {
    return fmt::format("[model]\npath = {}\nthreads = 1\n[prompt]\ntext = {}\n[generation]\nmax_tokens = {}\n"
                       "[output]\ndir = \"../runs/{}\"\nextract = true\n\n{}",
                       toml_literal(fixture_path("models/stories260K.gguf").string()), toml_literal(prompt), max_tokens,
                       name, experiment(builtin_plugin("finite-check")));
}

CommandResult sweep(const std::string& arguments) {
    return run_command(fmt::format("env -u EMBER_DEFAULTS XDG_CONFIG_HOME=/nonexistent {} sweep {} 2>&1",
                                   shell_quote(EMBER_BINARY), arguments));
}

json::array summary_of(const fs::path& file) { return json::parse(read_text(file)).as_array(); }

}  // namespace

TEST_CASE("ember sweep: a broken config is reported and the others finish, one model load, skips and --force") {
    SweepDir s;
    s.add("a", good_config("a", "Once upon a time"));
    s.add("b", "[model]\npath = \"m.gguf\"\n[prompt]\ntext = \"x\"\nmax_tokens = 3\n");
    s.add("c", fmt::format("[model]\npath = \"absent.gguf\"\n[prompt]\ntext = \"x\"\n[output]\ndir = \"../runs/c\"\n"));
    s.add("d", good_config("d", "The quick brown fox"));
    s.add("e", good_config("e", "Lily liked") + experiment(test_plugin("failing"), "stage = \"after_layer\""));
    const fs::path summary = s.dir.path() / "summary.json";

    const CommandResult r = sweep(fmt::format("{} --jobs 2 --summary {}", shell_quote(s.configs().string()),
                                              shell_quote(summary.string())));
    CHECK(r.exit_code == 1);
    CHECK(r.output.find('\r') == std::string::npos);  // not a terminal: no progress line
    CHECK(r.output.find("5 runs: 2 ok, 3 failed, 0 skipped") != std::string::npos);
    const json::array rows = summary_of(summary);
    REQUIRE(rows.size() == 5);
    std::vector<std::string> outcomes;
    for (const auto& row : rows) outcomes.push_back(str(row.at("outcome")));
    CHECK(outcomes == std::vector<std::string>{"ok", "failed", "failed", "ok", "failed"});
    CHECK(str(rows[0].at("config")) == (s.configs() / "a.toml").string());
    CHECK(str(rows[1].at("error")).find("b.toml:5:1: unknown key 'max_tokens' in [prompt]") != std::string::npos);
    CHECK(str(rows[2].at("error")).find("absent.gguf") != std::string::npos);
    CHECK(str(rows[4].at("error")).rfind("experiment 'failing' failed in after_layer", 0) == 0);
    CHECK(r.output.find("error: " + str(rows[1].at("error"))) != std::string::npos);  // the table names it too

    // One load for the three configs of stories260K (whichever came first loaded it).
    int loads = 0;
    for (std::size_t i : {0u, 3u, 4u}) loads += rows[i].at("model_shared").as_bool() ? 0 : 1;
    CHECK(loads == 1);
    for (const char* name : {"a", "d"}) {
        CAPTURE(name);
        const json::object& row = rows[name[0] == 'a' ? 0 : 3].as_object();
        CHECK(row.at("generated_tokens").to_number<int>() == 3);
        CHECK(row.at("prompt_tokens").to_number<int>() > 0);
        CHECK(str(row.at("output_dir")) == s.out(name).string());
        CHECK(record::verify_run_directory(s.out(name)).ok());
        const json::object report = json::parse(read_text(s.out(name) / "run.json")).as_object();
        CHECK(report.at("run_id") == row.at("run_id"));
        CHECK(stage_calls(report.at("experiments").at("experiments").as_array().at(0), "on_model_loaded") == 1);
    }

    // Again: the verified results are skipped, the failures run again.
    const CommandResult again = sweep(fmt::format("{} --summary {}", shell_quote(s.configs().string()),
                                                  shell_quote((s.dir.path() / "again.csv").string())));
    CHECK(again.exit_code == 1);
    CHECK(again.output.find("5 runs: 0 ok, 3 failed, 2 skipped") != std::string::npos);
    std::istringstream csv(read_text(s.dir.path() / "again.csv"));
    std::string header, line;
    std::getline(csv, header);
    CHECK(header.rfind("config,outcome,error,run_id,config_hash,output_dir,prompt_tokens,generated_tokens", 0) == 0);
    std::getline(csv, line);
    CHECK(line.rfind((s.configs() / "a.toml").string() + ",skipped,", 0) == 0);

    // A changed meaning (d) and a damaged result (a) run again; --force reruns everything.
    s.add("d", good_config("d", "The quick brown fox", 2));
    std::string bytes = read_text(s.out("a") / "after_layer.layer0.npy");
    bytes.back() = static_cast<char>(bytes.back() ^ 1);
    write_text(s.out("a") / "after_layer.layer0.npy", bytes);
    const fs::path a_and_d = s.dir.path() / "ad.json";
    CHECK(sweep(fmt::format("{} {} --summary {}", shell_quote((s.configs() / "a.toml").string()),
                            shell_quote((s.configs() / "d.toml").string()), shell_quote(a_and_d.string())))
              .exit_code == 0);
    json::array ad = summary_of(a_and_d);
    CHECK(ad[0].at("outcome") == "ok");
    CHECK(ad[1].at("outcome") == "ok");
    CHECK(ad[1].at("generated_tokens").to_number<int>() == 2);
    CHECK(sweep(fmt::format("{} {} --summary {}", shell_quote((s.configs() / "a.toml").string()),
                            shell_quote((s.configs() / "d.toml").string()), shell_quote(a_and_d.string())))
              .exit_code == 0);
    ad = summary_of(a_and_d);
    CHECK(ad[0].at("outcome") == "skipped");
    CHECK(sweep(fmt::format("--force {} --summary {}", shell_quote((s.configs() / "a.toml").string()),
                            shell_quote(a_and_d.string())))
              .exit_code == 0);
    CHECK(summary_of(a_and_d)[0].at("outcome") == "ok");
}

TEST_CASE("ember sweep: two configs with one output directory, usage errors, the progress line on a terminal") {
    SweepDir s;
    s.add("a", good_config("same", "Once upon a time", 2));
    s.add("b", good_config("same", "Once upon a time", 3));
    const CommandResult r = sweep(shell_quote(s.configs().string()));
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("is also the output directory of " + (s.configs() / "a.toml").string()) != std::string::npos);

    CHECK(sweep("").exit_code == 2);
    TempDir empty;
    CHECK(sweep(shell_quote(empty.path().string())).exit_code == 2);
    CHECK(sweep(shell_quote((s.configs() / "a.toml").string()) + " --summary out.txt").exit_code == 2);
    CHECK(sweep(shell_quote((s.configs() / "a.toml").string()) + " --jobs 0").exit_code == 2);
    CHECK(sweep(shell_quote((s.dir.path() / "nothing.toml").string())).exit_code == 2);

    // script(1) gives the sweep a terminal.
    const CommandResult tty = run_command(fmt::format(
        "script -qec {} /dev/null",
        shell_quote(fmt::format("env -u EMBER_DEFAULTS {} sweep --force {}", shell_quote(EMBER_BINARY),
                                shell_quote((s.configs() / "a.toml").string())))));
    CHECK(tty.exit_code == 0);
    CHECK(tty.output.find("\r[1/1] 1 ok, 0 failed, 0 skipped") != std::string::npos);
}

}  // namespace ember::test
