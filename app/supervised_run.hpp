// Supervised runs: whenever a run loads an experiment (run_pipeline.hpp), the run's work
// (loading the plugins, create, every stage, destroy, writing run.json and the manifest)
// happens in a worker process, this ember executable started again as
// `ember run --worker`, while this process supervises it (docs/experiments.md, "Crashes,
// hangs and exits"). A generation run and a dataset run are supervised alike.
//
// The worker runs in a process group of its own; it maps the model file again (the page
// cache is shared, nothing is copied; the supervisor's SHA-256 is passed so the file is not
// hashed twice), publishes the stage it is in (and, in a dataset run, the sample) through a
// StageRecord in shared memory, sends each token as it is chosen and ends with a frame
// saying how the run ended (worker_protocol.hpp). That frame is believed only from a
// worker that then exits with status 0 and sent nothing malformed before it; any other
// end is a crash: a signal, exit()/_exit()/quick_exit() from plugin code, the OOM killer,
// bytes on the control pipe that are not the worker's frames. A call still running 1 s
// past hooks.timeout_ms, or a run past hooks.run_timeout_s, is ended by the supervisor.
// SIGINT/SIGTERM to this process are passed to the worker's group, and SIGKILL follows
// kInterruptGraceMs later; the run is then "interrupted". However the worker ends, what
// is left of its process group is killed before the run's result is reported. Then the
// supervisor removes what the worker left half-written (its temporaries, a manifest),
// writes run.json with "outcome": "crashed", "timed_out" or "interrupted", and throws
// ember::Error:
//   experiment 'NAME' crashed (SIGSEGV) in after_mlp (phase=decode, layer=3)
//   experiment 'NAME' timed out after 1000 ms in after_mlp (phase=decode, layer=3) (hooks.timeout_ms = 100)
//   DATA.jsonl:4: sample s3: experiment 'NAME' crashed (SIGSEGV) in after_mlp (phase=prefill, layer=0)
// A dataset run's record keeps its finished batches: running it again resumes them.
#pragma once

#include <cstdint>

#include "dataset_job.hpp"
#include "run_job.hpp"

namespace ember::app {

// How long past hooks.timeout_ms a call may still run before the supervisor ends it (a
// call that returns late in that time fails by the policy, as an unsupervised run does).
inline constexpr std::uint32_t kTimeoutGraceMs = 1000;
// How long a worker has to end after SIGINT/SIGTERM was passed on before it is killed.
inline constexpr std::uint32_t kInterruptGraceMs = 2000;

// Runs `config` in a worker and supervises it; returns and throws as run_in_this_process
// does. options.observer must be null (an observer cannot cross processes).
RunOutcome supervise_run(const config::RunConfig& config, const LoadedModel& model, const RunOptions& options);

// The dataset run of `config` in a worker, as run_dataset_in_this_process; options take
// no runner and no on_batch (they cannot cross processes).
extract::DatasetResult supervise_dataset_run(const LoadedModel& model, const config::RunConfig& config,
                                             const extract::DatasetRunOptions& options);

// `ember run --worker`: the worker's side. Never returns.
[[noreturn]] void run_worker();

}  // namespace ember::app
