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

private:
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
