// What a supervised run's supervisor and its worker tell each other (supervised_run.hpp).
//
// To the worker, a memfd holding one JSON object: the run config exactly as parsed (so
// the worker neither reads the TOML again nor sees a file changed since), its hash (the
// worker checks it: a config field this file does not carry would change it), the run
// id, and the model's path and SHA-256 (the model is mapped again, not hashed again).
//
// From the worker, lines on a pipe:
//   t ID                       each generated token as it is chosen (a skipped run: each supplied one)
//   l {Lifecycle as JSON}      after before_prefill, when an experiment skipped or rewrote the prompt
//   done {RunOutcome as JSON}  the run finished; run.json, the arrays, the manifest are written
//   failed {"message": ...}    the run failed as an unsupervised run fails (run.json says so)
//   refused {"message": ...}   a plugin could not be loaded: nothing was started or written
// One of the last three is the worker's last line; a worker that ends without one crashed.
#pragma once

#include <boost/json/object.hpp>

#include <string>

#include "config/run_config.hpp"
#include "run_job.hpp"

namespace ember::app {

struct WorkerInput {
    config::RunConfig config;
    std::string config_hash;
    std::string run_id;
    std::string model_path;
    std::string model_sha256;
    double model_load_ms = 0;  // the supervisor's load of the model (run.json adds the worker's)
    bool overwrite = false;        // RunOptions::overwrite
    bool skip_if_current = false;  // RunOptions::skip_if_current
};

boost::json::object worker_input_json(const WorkerInput& input);
// Throws ember::Error when the JSON is not what worker_input_json writes or the config's
// hash differs from the one it carries.
WorkerInput worker_input_from_json(const boost::json::value& json);

boost::json::object outcome_json(const RunOutcome& outcome);
RunOutcome outcome_from_json(const boost::json::value& json);

// The "l" line's body (the worker's run_job Lifecycle), and back.
boost::json::object lifecycle_message(const Lifecycle& lifecycle);
Lifecycle lifecycle_from_message(const boost::json::value& json);

}  // namespace ember::app
