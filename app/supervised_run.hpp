// Supervised runs: whenever a run loads an experiment, the run's work (loading the
// plugins, create, every stage, destroy, writing run.json and the manifest) happens in a
// worker process, this ember executable started again as `ember run --worker`, while
// this process supervises it (docs/experiments.md, "Crashes, hangs and exits").
//
// The worker maps the model file again (the page cache is shared, nothing is copied;
// the supervisor's SHA-256 is passed so the file is not hashed twice), publishes the
// stage it is in through a StageRecord in shared memory, sends each token as it is
// chosen and ends with an explicit line saying how the run ended (worker_protocol.hpp).
// Any other end is a crash: a signal, exit()/_exit()/quick_exit() from plugin code, the
// OOM killer. A call still running 1 s past hooks.timeout_ms, or a run past
// hooks.run_timeout_s, is ended by the supervisor (SIGKILL). Then the supervisor removes
// what the worker left half-written (its temporaries, a manifest), writes run.json with
// "outcome": "crashed" or "timed_out", and throws ember::Error:
//   experiment 'NAME' crashed (SIGSEGV) in after_mlp (phase=decode, layer=3)
//   experiment 'NAME' timed out after 1000 ms in after_mlp (phase=decode, layer=3) (hooks.timeout_ms = 100)
//
// A run with no experiment never comes here: it runs in the calling process as before.
#pragma once

#include <string>

#include "run_job.hpp"

namespace ember::app {

// How long past hooks.timeout_ms a call may still run before the supervisor ends it (a
// call that returns late in that time fails by the policy, as an unsupervised run does).
inline constexpr std::uint32_t kTimeoutGraceMs = 1000;

// Runs `config` in a worker and supervises it; returns and throws as execute_run (its
// caller) does. options.observer must be null (an observer cannot cross processes).
RunOutcome supervise_run(const config::RunConfig& config, const LoadedModel& model, const RunOptions& options);

// `ember run --worker`: the worker's side. Never returns.
[[noreturn]] void run_worker();

}  // namespace ember::app
