// Rung: smoke. `ember sweep --slurm` writes scripts whose lines no name can change (issue
// 24, "Slurm"): a config's file name, --slurm-dir, --slurm-opt and --summary holding
// quotes, $(), backticks and "#SBATCH" give scripts that bash -n accepts, with exactly the
// #SBATCH and command lines of a plain sweep, and that run a stand-in `ember` with each
// path as one argument and create no PWNED file; a newline or carriage return in any of
// them is refused before anything is written. On the code before this suite a newline in
// a config's name or in --slurm-dir became a command line of sweep.sbatch (`touch PWNED`
// ran when the script did).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "support/files.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

CommandResult ember_in(const fs::path& dir, const std::string& arguments) {
    return run_command(fmt::format("cd {} && env -u EMBER_DEFAULTS XDG_CONFIG_HOME=/nonexistent {} {} 2>&1",
                                   shell_quote(dir.string()), shell_quote(EMBER_BINARY), arguments));
}

std::string config_text() {
    return fmt::format("[model]\npath = '{}'\nthreads = 1\n[prompt]\ntext = 'Once'\n[generation]\nmax_tokens = 1\n"
                       "[output]\ndir = 'out'\n",
                       fixture_path("models/stories260K.gguf").string());
}

struct ScriptLines {
    std::vector<std::string> directives;  // "#SBATCH ..." lines
    std::vector<std::string> commands;    // lines bash runs (not comments, not blank)
};

ScriptLines lines_of(const std::string& script) {
    ScriptLines out;
    std::istringstream in(script);
    for (std::string line; std::getline(in, line);) {
        if (line.starts_with("#SBATCH")) out.directives.push_back(line);
        else if (!line.empty() && !line.starts_with("#")) out.commands.push_back(line);
    }
    return out;
}

// Files named PWNED anywhere under `dir`.
std::vector<std::string> pwned_files(const fs::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.path().filename().string().starts_with("PWNED")) out.push_back(e.path().string());
    return out;
}

}  // namespace

TEST_CASE("quotes, $(), backticks and #SBATCH in every name stay bytes of one word of one line") {
    TempDir dir;
    const std::string evil = "a'b\"c$(touch PWNED1)`touch PWNED2`;touch PWNED3 #SBATCH --wrap=x";
    fs::create_directories(dir.path() / ("configs " + evil));
    const fs::path config = dir.path() / ("configs " + evil) / (evil + ".toml");
    write_all(config, config_text());
    const fs::path slurm = dir.path() / "slurm-$(touch_PWNED4)`touch_PWNED5`#SBATCH";
    const fs::path summary = dir.path() / ("sum " + evil + ".csv");
    const CommandResult w = ember_in(dir.path(), fmt::format("sweep --slurm --slurm-dir {} --summary {} {} {}",
                                                             shell_quote(slurm.string()), shell_quote(summary.string()),
                                                             shell_quote("--slurm-opt=--comment=$(touch PWNED6)`x`"),
                                                             shell_quote(config.string())));
    REQUIRE_MESSAGE(w.exit_code == 0, w.output);

    // The stand-in ember: each argument it was given on a line of its own.
    const fs::path stub = dir.path() / "stub-ember";
    write_all(stub, "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done >> \"$STUB_LOG\"\n");
    fs::permissions(stub, fs::perms::owner_all);
    for (const char* name : {"sweep.sbatch", "summary.sbatch"}) {
        CAPTURE(name);
        std::string script = read_all(slurm / name);
        const ScriptLines lines = lines_of(script);
        CHECK(run_command("bash -n " + shell_quote((slurm / name).string()) + " 2>&1").exit_code == 0);
        const bool sweep = std::string(name) == "sweep.sbatch";
        // Exactly the lines of a plain sweep: job name, (array), output, the one option.
        REQUIRE(lines.directives.size() == (sweep ? 4u : 3u));
        CHECK(lines.directives[0].starts_with("#SBATCH --job-name=ember-a_b_c__touch_PWNED1__touch_PWNED2__touch_PWNED3__SBATCH_--wrap_x"));
        CHECK(lines.directives.back() == "#SBATCH --comment=$(touch PWNED6)`x`");
        CHECK(lines.commands.size() == (sweep ? 5u : 2u));
        CHECK(lines.commands.front() == "set -u");

        // Run it with the stand-in in place of the binary (the path the script quotes).
        const std::string ember_path = fs::canonical(EMBER_BINARY).string();
        const std::string quoted = "'" + ember_path + "'";
        const std::size_t at = script.find(quoted + " sweep");
        REQUIRE_MESSAGE(at != std::string::npos, script);
        script.replace(at, quoted.size(), "'" + stub.string() + "'");
        const fs::path edited = dir.path() / (std::string("run-") + name);
        write_all(edited, script);
        const fs::path log = dir.path() / (std::string(name) + ".args");
        const CommandResult run = run_command(fmt::format("cd {} && SLURM_ARRAY_TASK_ID=0 STUB_LOG={} bash {} 2>&1",
                                                          shell_quote(dir.path().string()), shell_quote(log.string()),
                                                          shell_quote(edited.string())));
        CHECK_MESSAGE(run.exit_code == 0, run.output);
        const std::string args = read_all(log);
        CHECK_MESSAGE(args.find("\n" + config.string() + "\n") != std::string::npos, args);  // one argument, whole
        if (!sweep) CHECK_MESSAGE(args.find("\n" + summary.string() + "\n") != std::string::npos, args);
    }
    CHECK(pwned_files(dir.path()).empty());
}

TEST_CASE("a newline or carriage return in any string that reaches a script is refused before anything is written") {
    TempDir dir;
    const fs::path good = dir.path() / "good.toml";
    write_all(good, config_text());
    const fs::path bad_config = dir.path() / "a\ntouch PWNED\n#SBATCH --x.toml";
    write_all(bad_config, config_text());
    struct Case {
        std::string arguments;
        std::string named;
    };
    const fs::path slurm = dir.path() / "slurm";
    const Case cases[] = {
        {fmt::format("--slurm-dir {} {}", shell_quote(slurm.string()), shell_quote(bad_config.string())), "the config"},
        {fmt::format("--slurm-dir {} {}", shell_quote((dir.path() / "s\ntouch PWNED").string()), shell_quote(good.string())),
         "--slurm-dir"},
        {fmt::format("--slurm-dir {} --slurm-opt={} {}", shell_quote(slurm.string()), shell_quote("--time=5\rtouch PWNED"),
                     shell_quote(good.string())),
         "--slurm-opt"},
        {fmt::format("--slurm-dir {} --summary {} {}", shell_quote(slurm.string()),
                     shell_quote((dir.path() / "x\ntouch PWNED.csv").string()), shell_quote(good.string())),
         "--summary"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.arguments);
        const CommandResult r = ember_in(dir.path(), "sweep --slurm " + c.arguments);
        CHECK(r.exit_code == 1);
        CHECK_MESSAGE(r.output.find(c.named) != std::string::npos, r.output);
        CHECK_MESSAGE(r.output.find("which would change the lines of the generated script") != std::string::npos, r.output);
        CHECK_FALSE(fs::exists(slurm / "sweep.sbatch"));
        CHECK_FALSE(fs::exists(slurm / "summary.sbatch"));
    }
    // A space or a quote in --slurm-dir: it stands on an #SBATCH --output line.
    for (const char* name : {"my slurm", "it's"}) {
        const CommandResult r = ember_in(dir.path(), fmt::format("sweep --slurm --slurm-dir {} {}",
                                                                 shell_quote((dir.path() / name).string()),
                                                                 shell_quote(good.string())));
        CHECK(r.exit_code == 1);
        CHECK_MESSAGE(r.output.find("which an #SBATCH --output line cannot carry") != std::string::npos, r.output);
    }
    CHECK(pwned_files(dir.path()).empty());
}

}  // namespace ember::test
