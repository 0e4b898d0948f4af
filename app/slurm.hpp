// `ember sweep --slurm`: a sweep as a Slurm job array. Two plain bash scripts are written,
// meant to be read and edited for a cluster: sweep.sbatch, a job array of N tasks where
// task K runs `ember sweep --shard K/N` on the same arguments, and summary.sbatch, which
// runs `ember sweep --collect --summary FILE` once every task has succeeded. Ember talks
// to Slurm only through the `sbatch` command (found on PATH), nothing else. A sweep with
// sharded dataset runs ([dataset] shards = N) has their shards among the array's runs, and
// summary.sbatch first joins each one's shards with `ember merge`.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace ember::app {

// A dataset run done as shards: the final job joins them (`ember merge --overwrite`).
struct SlurmMerge {
    std::vector<std::filesystem::path> shards;  // the shard directories, in order
    std::filesystem::path out;                  // the merged run's directory
};

struct SlurmPlan {
    std::filesystem::path dir;                // where the scripts and the tasks' logs go
    std::filesystem::path ember;              // the binary the tasks run (absolute)
    std::vector<std::filesystem::path> configs;  // the sweep's arguments, absolute
    std::size_t runs = 0;                     // how many runs they expand to (for the script's comment)
    std::size_t shards = 1;                   // the array's tasks
    std::vector<std::string> options;         // --slurm-opt values: one `#SBATCH ARG` line each, in both scripts
    std::vector<std::string> sweep_options;   // passed to every task's `ember sweep` (--jobs N, --force)
    std::filesystem::path summary;            // the summary file the final job writes (.csv or .json)
    std::vector<SlurmMerge> merges;           // the final job's merges, before the summary
};

struct SlurmScripts {
    std::filesystem::path sweep;    // DIR/sweep.sbatch
    std::filesystem::path summary;  // DIR/summary.sbatch
};

// Writes both scripts (temporary name, then rename; mode 0755). Every string of the plan
// that reaches a script is checked first or shell-quoted, so that no byte sequence changes
// the scripts' lines: ember::Error, before anything is written, for a control byte
// (newline, carriage return) in any of them, and for a space, quote or backslash in the
// directory (it stands on an #SBATCH --output line); the job name keeps only
// [A-Za-z0-9._-] of the first config's name.
SlurmScripts write_slurm_scripts(const SlurmPlan& plan);

struct SlurmJobs {
    std::string sweep;    // the array's job id
    std::string summary;  // the summary job's id
};

// `sbatch --parsable sweep.sbatch`, then `sbatch --parsable --dependency=afterok:ID
// --kill-on-invalid-dep=yes summary.sbatch`. ember::Error when sbatch cannot be run,
// fails, or prints no job id.
SlurmJobs submit_slurm(const SlurmScripts& scripts);

}  // namespace ember::app
