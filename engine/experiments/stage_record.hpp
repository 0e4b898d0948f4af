// The last stage a supervised worker entered, in memory it shares with the supervisor
// (docs/experiments.md, "Crashes, hangs and exits").
//
// The worker's ExperimentRunner writes it around every call into a plugin (and around
// loading and destroy); the supervisor reads `active` and `entered_ns` while the worker
// runs (to end a call past hooks.timeout_ms) and the rest once the worker is gone (to
// name where it died). One writer, no lock: the two fields read during the run are
// atomics, everything else is read only after waitpid.
//
//   SharedStageRecord shared = SharedStageRecord::create();   // supervisor, before spawning
//   ... the worker: SharedStageRecord::attach(fd) -> record().enter(...); call; record().leave();
//   ... the supervisor, after the worker ended: shared.record().where()
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "hooks/hooks.hpp"

namespace ember::experiments {

struct StageRecord {
    std::atomic<std::uint32_t> active{0};     // 1 while inside the call
    std::atomic<std::int64_t> entered_ns{0};  // steady_clock (CLOCK_MONOTONIC) when it was entered
    std::uint32_t entered = 0;                // 1 once any stage was entered
    std::uint32_t has_phase = 0;
    std::uint32_t phase = 0;  // hooks::Phase
    std::uint32_t has_layer = 0;
    std::uint32_t layer = 0;
    std::uint64_t step = 0;  // the decode step (0: prefill)
    char experiment[64] = {};  // the plugin's name (for "load": its file name)
    char stage[32] = {};       // "load", "create", ..., "after_mlp", ..., "destroy"
    // A dataset run: the sample being evaluated (set before its before_prefill).
    std::uint32_t has_sample = 0;
    std::uint64_t sample_index = 0;  // 0-based, in dataset order
    std::uint64_t sample_line = 0;   // 1-based line of the dataset file
    char sample_id[128] = {};        // as messages print it (Sample::id_text), cut to fit

    // The sample a dataset run evaluates from now on.
    void set_sample(std::uint64_t index, std::uint64_t line, std::string_view id) {
        copy(sample_id, id);
        sample_index = index;
        sample_line = line;
        has_sample = 1;
    }

    // Called by the worker right before a call into plugin code.
    void enter(std::string_view experiment_name, std::string_view stage_name, const hooks::EvalInfo* eval,
               bool with_layer, std::uint32_t layer_index, std::chrono::steady_clock::time_point now) {
        copy(experiment, experiment_name);
        copy(stage, stage_name);
        has_phase = eval != nullptr;
        phase = eval ? static_cast<std::uint32_t>(eval->phase) : 0;
        step = eval ? eval->step : 0;
        has_layer = with_layer;
        layer = layer_index;
        entered = 1;
        entered_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count(),
                         std::memory_order_relaxed);
        active.store(1, std::memory_order_release);
    }
    void leave() { active.store(0, std::memory_order_release); }

    // "after_mlp (phase=decode, layer=3, step=2)", "create", "load"; empty when nothing was entered.
    std::string where() const;

    // The supervisor reads the record after the worker died: plugin code may have written
    // anything into it, so every text is read within its array and every code checked.
    std::string experiment_name() const { return bounded(experiment); }
    std::string stage_name() const { return bounded(stage); }
    std::string sample_id_text() const { return bounded(sample_id); }
    std::optional<hooks::Phase> phase_value() const;  // nullopt: none, or not a phase

private:
    template <std::size_t N>
    static std::string bounded(const char (&text)[N]) {
        return std::string(text, ::strnlen(text, N));
    }
    template <std::size_t N>
    static void copy(char (&to)[N], std::string_view from) {
        const std::size_t n = from.size() < N - 1 ? from.size() : N - 1;
        std::memcpy(to, from.data(), n);
        to[n] = '\0';
    }
};

// A StageRecord in a memfd mapped MAP_SHARED: created by the supervisor, passed to the
// worker as a file descriptor and mapped again there. Throws ember::Error.
class SharedStageRecord {
public:
    static SharedStageRecord create();
    static SharedStageRecord attach(int fd);
    SharedStageRecord(SharedStageRecord&& other) noexcept;
    SharedStageRecord& operator=(SharedStageRecord&&) = delete;
    ~SharedStageRecord();

    StageRecord& record() const { return *record_; }
    int fd() const { return fd_; }

private:
    SharedStageRecord(int fd, StageRecord* record) : fd_(fd), record_(record) {}
    int fd_ = -1;
    StageRecord* record_ = nullptr;
};

}  // namespace ember::experiments
