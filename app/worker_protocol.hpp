// What a supervised run's supervisor and its worker tell each other (supervised_run.hpp).
//
// To the worker, a memfd holding the channel's nonce on a line of its own, then one JSON object: which job it is (a generation run or a
// dataset run), the run config exactly as parsed (so the worker neither reads the TOML
// again nor sees a file changed since), its hash (the worker checks it: a config field
// this file does not carry would change it), the run id, the model's path and SHA-256
// (the model is mapped again, not hashed again) and the channel's nonce.
//
// From the worker, frames on a pipe: a 4-byte little-endian length (at most
// kMaxFrameBytes), then that many bytes of one JSON object
//   {"nonce": NONCE, "kind": KIND, "body": BODY}
// with KIND one of
//   token      {"id": N}                each generated token as it is chosen (a skipped run: each supplied one)
//   lifecycle  {Lifecycle as JSON}      after before_prefill, when an experiment skipped or rewrote the prompt
//   done       {RunOutcome | DatasetResult as JSON}  the run finished and is sealed
//   failed     {"message": ...}         the run failed as an unsupervised run fails (run.json says so)
//   refused    {"message": ...}         a plugin could not be loaded: nothing was started or written
//   in_use     {"message": ...}         the output directory is another process's (DirectoryInUse)
//   not_needed {"message": ...}         the directory holds a current result (RunNotNeeded)
// The nonce is 32 random hex digits the supervisor made for this worker: plugin code in
// the worker that writes to the pipe does not know it, so what it writes is refused, not
// believed. Anything else (a bad length, bytes that are not such an object, an unknown
// kind, a body of the wrong shape, a token outside the vocabulary) is a ProtocolError;
// the supervisor then believes nothing more from that worker (supervised_run.cpp).
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.hpp"
#include "config/run_config.hpp"
#include "extract/dataset_extraction.hpp"
#include "run_job.hpp"

namespace ember::app {

// The worker's descriptors: the input memfd, the stage record, the control pipe's write end.
inline constexpr int kInputFd = 3;
inline constexpr int kRecordFd = 4;
inline constexpr int kControlFd = 5;

// What the worker runs: execute_run's job or a dataset run's.
enum class WorkerJob { Generation, Dataset };

struct WorkerInput {
    WorkerJob job = WorkerJob::Generation;
    config::RunConfig config;
    std::string config_hash;
    std::string run_id;
    std::string model_path;
    std::string model_sha256;
    double model_load_ms = 0;  // the supervisor's load of the model (run.json adds the worker's)
    bool overwrite = false;        // RunOptions::overwrite
    bool skip_if_current = false;  // RunOptions::skip_if_current
    bool progress = false;         // a dataset run's progress line (DatasetRunOptions::progress)
    std::string nonce;             // every frame from the worker carries it
};

boost::json::object worker_input_json(const WorkerInput& input);
// Throws ember::Error when the JSON is not what worker_input_json writes or the config's
// hash differs from the one it carries.
WorkerInput worker_input_from_json(const boost::json::value& json);

// 32 random hex digits.
std::string make_nonce();

// A frame that is not one the worker writes.
class ProtocolError : public Error {
public:
    using Error::Error;
};

inline constexpr std::uint32_t kMaxFrameBytes = 64u << 20;

// One frame's bytes: the length, then the JSON object.
std::string encode_frame(std::string_view nonce, std::string_view kind, const boost::json::value& body);

// Cuts the pipe's bytes into frame payloads.
class FrameReader {
public:
    void feed(const char* bytes, std::size_t n) { pending_.append(bytes, n); }
    // The next whole payload, or nullopt when more bytes are needed. ProtocolError for a
    // length of 0 or above kMaxFrameBytes.
    std::optional<std::string> next();

private:
    std::string pending_;
};

struct WorkerMessage {
    std::string kind;
    boost::json::value body;
};

// A payload checked as above (the nonce, a known kind, its body's shape; a token below
// `vocab_size`). ProtocolError saying what is wrong.
WorkerMessage parse_message(std::string_view payload, std::string_view nonce, std::uint64_t vocab_size);

boost::json::object outcome_json(const RunOutcome& outcome);
RunOutcome outcome_from_json(const boost::json::value& json);  // ProtocolError

boost::json::object dataset_result_json(const extract::DatasetResult& result);
extract::DatasetResult dataset_result_from_json(const boost::json::value& json);  // ProtocolError

// The lifecycle frame's body (the worker's run_job Lifecycle), and back (ProtocolError).
boost::json::object lifecycle_message(const Lifecycle& lifecycle);
Lifecycle lifecycle_from_message(const boost::json::value& json);

}  // namespace ember::app
