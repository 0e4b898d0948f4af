// The trace journal: a kernels::OpObserver that writes one JSON object per operation, one
// per line, in execution order (docs/formats.md, "Trace journal"):
//
//   {"seq":12,"name":"attn_q","op_kind":"projection","layer":0,"phase":"prefill","step":0,
//    "input_shape":[7,64],"output_shape":[7,64],"input_bytes":17920,"output_bytes":1792,
//    "start_ns":48211,"duration_ns":3105,"estimated_flops":57344,"route":"reference",
//    "kernel":"reference.matmul.f32","weight_type":"F32","variant":"scalar-reference"}
//
// The session announces each evaluation (begin_evaluation), which gives every later
// operation its phase and step. Lines go through a buffered AtomicFile: the journal
// appears under its name only when finish() commits it; a journal destroyed unfinished
// (a failed run) leaves nothing behind. The fingerprint is computed as lines are written.
//
// Attach it with SessionOptions::observer; tracing never changes a computed value.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

#include "common/atomic_file.hpp"
#include "kernels/ops.hpp"
#include "trace/fingerprint.hpp"

namespace ember::trace {

struct JournalSummary {
    std::filesystem::path path;
    std::size_t operations = 0;
    std::size_t evaluations = 0;
    std::uint64_t traced_ns = 0;  // the operations' durations summed
    std::string fingerprint;      // see fingerprint.hpp
};

class Journal final : public kernels::OpObserver {
public:
    // Creates the parent directories and the temporary file; throws ember::Error.
    explicit Journal(const std::filesystem::path& path);

    void begin_evaluation(const kernels::EvaluationMark& mark) override;
    void on_op(const kernels::OpRecord& record) override;

    // Commits the file under its name. Call once, after the last operation.
    JournalSummary finish();

    const std::filesystem::path& path() const { return out_.path(); }
    std::size_t operations() const { return fingerprint_.operations(); }
    std::string fingerprint() const { return fingerprint_.hex(); }

private:
    AtomicFile out_;
    Fingerprint fingerprint_;
    std::chrono::steady_clock::time_point origin_;
    std::string phase_ = "prefill";
    std::size_t step_ = 0;
    std::size_t evaluations_ = 0;
    std::uint64_t traced_ns_ = 0;
    fmt::memory_buffer line_;
};

}  // namespace ember::trace
