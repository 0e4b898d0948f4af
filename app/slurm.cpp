#include "slurm.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/printable.hpp"

namespace ember::app {
namespace {

namespace fs = std::filesystem;

// A word for bash: single-quoted, a quote inside written '\''.
std::string quoted(const std::string& word) {
    std::string out = "'";
    for (char c : word) {
        if (c == '\'') out.append("'\\''");
        else out.push_back(c);
    }
    out.push_back('\'');
    return out;
}

// Every string that reaches a script is checked here or quoted. A control byte (a newline,
// a carriage return) would end the line it is on, a comment's or an #SBATCH directive's,
// and start a line of its own: refused in everything. Inside a command line, quoted()
// makes any other byte ($(), backticks, quotes, '#SBATCH') a plain part of one word.
void check_script_text(std::string_view what, const std::string& text) {
    for (char c : text)
        if (is_control_byte(c))
            throw Error(fmt::format("ember sweep --slurm: {} '{}' holds the control byte 0x{:02x}, which would change the "
                                    "lines of the generated script; rename it",
                                    what, printable(text), static_cast<unsigned char>(c)));
}

// A path on an #SBATCH line (the logs): sbatch, not bash, reads it there, and a space, a
// quote or a backslash is sbatch's own syntax.
void check_directive_path(std::string_view what, const fs::path& path) {
    check_script_text(what, path.string());
    const std::size_t at = path.string().find_first_of(" \t'\"\\");
    if (at != std::string::npos)
        throw Error(fmt::format("ember sweep --slurm: {} '{}' holds '{}', which an #SBATCH --output line cannot carry; "
                                "choose a directory whose path has no spaces, quotes or backslashes",
                                what, path.string(), path.string()[at]));
}

// The job name from the first config's name: letters, digits, '.', '_' and '-' as they
// are, every other byte as '_' (it stands on an #SBATCH line, unquoted).
std::string job_name(const SlurmPlan& plan) {
    std::string name = plan.configs.empty() ? "sweep" : plan.configs.front().stem().string();
    for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
    return name.empty() ? "sweep" : name;
}

std::string sbatch_lines(const std::vector<std::string>& options) {
    std::string out;
    for (const std::string& option : options) {
        check_script_text("--slurm-opt", option);
        out += fmt::format("#SBATCH {}\n", option);
    }
    return out;
}

// Everything of `plan` that a script holds, checked before either script is written.
void check_plan(const SlurmPlan& plan) {
    check_directive_path("--slurm-dir", plan.dir);
    check_script_text("the ember binary's path", plan.ember.string());
    for (const fs::path& c : plan.configs) check_script_text("the config", c.string());
    for (const std::string& o : plan.sweep_options) check_script_text("the sweep option", o);
    check_script_text("--summary", plan.summary.string());
    for (const SlurmMerge& m : plan.merges) {
        for (const fs::path& shard : m.shards) check_script_text("the shard directory", shard.string());
        check_script_text("the merged run's directory", m.out.string());
    }
}

std::string sweep_command(const SlurmPlan& plan, const std::vector<std::string>& options) {
    std::string out = quoted(plan.ember.string()) + " sweep";
    for (const std::string& o : options) out.append(" ").append(o);
    for (const fs::path& c : plan.configs) out.append(" ").append(quoted(c.string()));
    return out;
}

void write_script(const fs::path& path, const std::string& text) {
    write_file_atomically(path, text);
    fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
}

// Runs argv (found on PATH) and returns its stdout; its stderr goes to ours.
std::string run_program(const std::vector<std::string>& argv) {
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) throw Error(fmt::format("cannot create a pipe: {}", std::strerror(errno)));
    const pid_t pid = ::fork();
    if (pid < 0) throw Error(fmt::format("cannot fork to run {}: {}", argv[0], std::strerror(errno)));
    if (pid == 0) {
        ::dup2(pipe_fds[1], STDOUT_FILENO);
        ::close(pipe_fds[0]);
        ::close(pipe_fds[1]);
        std::vector<char*> args;
        for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        ::execvp(args[0], args.data());
        const std::string message = fmt::format("ember: cannot run {}: {}\n", argv[0], std::strerror(errno));
        [[maybe_unused]] const auto written = ::write(STDERR_FILENO, message.data(), message.size());
        ::_exit(127);
    }
    ::close(pipe_fds[1]);
    std::string out;
    char buffer[4096];
    for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        out.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(pipe_fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::string command;
    for (const std::string& a : argv) command += (command.empty() ? "" : " ") + a;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw Error(fmt::format("`{}` failed (exit {}){}", command, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                                out.empty() ? "" : ": " + out));
    return out;
}

// `sbatch --parsable` prints "ID" or "ID;CLUSTER".
std::string job_id(const std::string& output, const fs::path& script) {
    std::string id = output.substr(0, output.find_first_of(";\n"));
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
        throw Error(fmt::format("sbatch printed no job id for {} (it printed '{}')", script.string(), output));
    return id;
}

}  // namespace

SlurmScripts write_slurm_scripts(const SlurmPlan& plan) {
    check_plan(plan);
    const std::string options = sbatch_lines(plan.options);
    const std::string name = job_name(plan);
    fs::create_directories(plan.dir);
    const SlurmScripts scripts{plan.dir / "sweep.sbatch", plan.dir / "summary.sbatch"};

    std::vector<std::string> task_options = plan.sweep_options;
    task_options.insert(task_options.begin(), fmt::format("--shard \"$SLURM_ARRAY_TASK_ID/{}\"", plan.shards));
    write_script(scripts.sweep,
                 fmt::format("#!/bin/bash\n"
                             "# Written by `ember sweep --slurm` (docs/sweep.md): {} runs as a job array of {} tasks;\n"
                             "# task K runs shard K of {} (`ember sweep --shard K/{}`). Edit it for your cluster.\n"
                             "# Submit it with summary.sbatch after it:\n"
                             "#   jid=$(sbatch --parsable {})\n"
                             "#   sbatch --dependency=afterok:$jid --kill-on-invalid-dep=yes {}\n"
                             "#SBATCH --job-name=ember-{}\n"
                             "#SBATCH --array=0-{}\n"
                             "#SBATCH --output={}\n"
                             "{}"
                             "set -u\n"
                             "# Exit 1 means a run failed: its run.json says why and the summary lists it, so the task\n"
                             "# still succeeds. Anything else (a crash, a bad argument) fails the task.\n"
                             "{}\n"
                             "status=$?\n"
                             "if [ \"$status\" -eq 1 ]; then exit 0; fi\n"
                             "exit \"$status\"\n",
                             plan.runs, plan.shards, plan.shards, plan.shards, quoted(scripts.sweep.string()),
                             quoted(scripts.summary.string()), name, plan.shards - 1,
                             (plan.dir / "shard-%a.out").string(), options, sweep_command(plan, task_options)));
    std::string merges;
    for (const SlurmMerge& m : plan.merges) {
        std::string command = quoted(plan.ember.string()) + " merge --overwrite";
        for (const fs::path& shard : m.shards) command.append(" ").append(quoted(shard.string()));
        merges += fmt::format("{} --out {} || exit 1\n", command, quoted(m.out.string()));
    }
    if (!merges.empty())
        merges = "# The dataset runs done as shards, each joined into one sealed directory (ember merge).\n" + merges;
    write_script(scripts.summary,
                 fmt::format("#!/bin/bash\n"
                             "# Written by `ember sweep --slurm` (docs/sweep.md): after every task of sweep.sbatch has\n"
                             "# succeeded, {}the summary of all {} runs, read from their output directories.\n"
                             "#SBATCH --job-name=ember-{}-summary\n"
                             "#SBATCH --output={}\n"
                             "{}"
                             "set -u\n"
                             "{}"
                             "exec {}\n",
                             plan.merges.empty() ? "" : "the merge of the sharded dataset runs, then ", plan.runs,
                             name, (plan.dir / "summary.out").string(), options, merges,
                             sweep_command(plan, {"--collect", "--summary " + quoted(plan.summary.string())})));
    return scripts;
}

SlurmJobs submit_slurm(const SlurmScripts& scripts) {
    SlurmJobs jobs;
    jobs.sweep = job_id(run_program({"sbatch", "--parsable", scripts.sweep.string()}), scripts.sweep);
    jobs.summary = job_id(run_program({"sbatch", "--parsable", "--dependency=afterok:" + jobs.sweep,
                                       "--kill-on-invalid-dep=yes", scripts.summary.string()}),
                          scripts.summary);
    return jobs;
}

}  // namespace ember::app
