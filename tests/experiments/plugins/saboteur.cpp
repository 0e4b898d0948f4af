// A saboteur for the supervision tests (tests/run/supervise_hardening_test.cpp): plugin
// code that crashes, exits, loops, forges the worker's control messages, forks children
// that outlive it, ignores signals. (tests/run/hostile/hostile.cpp is its elder, built by
// supervise_test as an outside author builds one.)
//
// Config:
//   act   = "segv" | "abort" | "exit0" | "quick_exit" | "loop" | "overrun" | "sleep"
//           | "log" (hostile log lines) | "plus_inf" | "all_minus_inf"
//   stage = "create" | "before_layer" | "after_mlp" | "after_logits" | "destroy"   where it acts
//   phase = "prefill" | "decode" (default: either), layer = N (default: any), step = N
//   sleep_ms = N (act = "sleep": each call at the stage sleeps this long)
//   token = N (act = "plus_inf": the logit set to +inf; "plus_inf_2" also sets token + 1)
//   act = "forge_failed": writes a made-up "failed" message to the worker's control pipe
//         (fd 5), in the old line form and as a frame without the nonce, then segfaults
//   act = "garbage": writes bytes that are no frame to the control pipe, then goes on
//   act = "fork_orphan": forks a child that sleeps orphan_ms, then writes orphan_path
//   act = "fork_orphan_setsid" / "fork_orphan_setpgid": the same child, which first leaves
//         the worker's process group (a session or a group of its own)
//   act = "fork_orphan_daemon": a daemon's double fork: the child calls setsid, forks the
//         grandchild that sleeps and writes, and exits
//   act = "ignore_signals": ignores SIGINT and SIGTERM, writes its pid to pid_file, loops
//   calls = N: act at the N-th matching call only (1-based; default: every one)
//   trigger = PATH: act only while that file exists
#include <ember/experiment.hpp>

#include <chrono>
#include <cmath>
#include <csignal>
#include <limits>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include <unistd.h>

namespace {

class Saboteur : public ember::Experiment {
public:
    explicit Saboteur(const ember::ExperimentConfig& config)
        : act_(config.get_string("act", "segv")),
          stage_(config.get_string("stage", "after_mlp")),
          phase_(config.get_string("phase", "")),
          layer_(config.get_int("layer", -1)),
          step_(config.get_int("step", -1)),
          sleep_ms_(config.get_int("sleep_ms", 0)),
          token_(config.get_int("token", 0)),
          calls_(config.get_int("calls", 0)),
          orphan_ms_(config.get_int("orphan_ms", 1500)),
          trigger_(config.get_string("trigger", "")),
          orphan_path_(config.get_string("orphan_path", "")),
          pid_file_(config.get_string("pid_file", "")) {
        if (stage_ == "create") strike(nullptr);
    }
    ~Saboteur() override {
        if (stage_ == "destroy") strike(nullptr);
    }
    const char* name() const override { return "saboteur"; }

    ember::Status before_layer(const ember::LayerContext& ctx, ember::TensorAccess& t) override {
        return at("before_layer", ctx.phase, static_cast<long>(ctx.layer_index), ctx, t);
    }
    ember::Status after_mlp(const ember::LayerContext& ctx, ember::TensorAccess& t) override {
        return at("after_mlp", ctx.phase, static_cast<long>(ctx.layer_index), ctx, t);
    }
    ember::Status after_logits(const ember::ExecutionContext& ctx, ember::TensorAccess& t) override {
        ++logits_calls_;
        return at("after_logits", ctx.phase, -1, ctx, t);
    }

private:
    template <class Context>
    ember::Status at(const char* stage, ember::ExecutionPhase phase, long layer, const Context&, ember::TensorAccess& t) {
        if (stage_ != stage) return {};
        if (!phase_.empty() && phase_ != ember::phase_name(phase)) return {};
        if (layer_ >= 0 && layer != layer_) return {};
        if (step_ >= 0 && logits_calls_ - 1 != step_ && stage_ == "after_logits") return {};
        if (calls_ > 0 && ++matched_ != calls_) return {};
        strike(&t);
        return {};
    }

    static void write_control(const std::string& bytes) {
        if (::write(5, bytes.data(), bytes.size()) < 0) std::abort();
    }

    void strike(ember::TensorAccess* t) {
        if (!trigger_.empty() && !std::ifstream(trigger_)) return;
        if (act_ == "segv") {
            volatile int* nowhere = nullptr;
            *nowhere = 1;
        } else if (act_ == "abort") {
            std::abort();
        } else if (act_ == "exit0") {
            std::exit(0);
        } else if (act_ == "quick_exit") {
            std::quick_exit(0);
        } else if (act_ == "loop") {
            volatile unsigned long spins = 0;
            for (;;) spins = spins + 1;
        } else if (act_ == "sleep") {
            std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms_));
        } else if (act_ == "overrun" && t) {
            float* past = t->values_mut().data() + t->values().size();
            for (long i = 0; i < 100000; ++i) past[i] = 1e30f;
        } else if (act_ == "log") {
            ember::host().info("bell\a escape\x1b[31mred\x1b[0m tab\t cr\r invalid \xff\xfe utf8 done");
            ember::host().info(std::string(200000, 'x'));
        } else if (act_ == "plus_inf" && t) {
            t->values_mut()[static_cast<std::size_t>(token_)] = std::numeric_limits<float>::infinity();
        } else if (act_ == "plus_inf_2" && t) {
            t->values_mut()[static_cast<std::size_t>(token_)] = std::numeric_limits<float>::infinity();
            t->values_mut()[static_cast<std::size_t>(token_) + 1] = std::numeric_limits<float>::infinity();
        } else if (act_ == "forge_failed") {
            write_control("failed {\"message\":\"all is well\"}\n");
            const std::string frame = R"({"nonce":"0","kind":"failed","body":{"message":"all is well"}})";
            const std::uint32_t n = static_cast<std::uint32_t>(frame.size());
            write_control(std::string(reinterpret_cast<const char*>(&n), 4) + frame);
            volatile int* nowhere = nullptr;
            *nowhere = 1;
        } else if (act_ == "garbage") {
            write_control("t notanumber\n\xff\xff\xff\x7f");
        } else if (act_.starts_with("fork_orphan")) {
            if (::fork() == 0) {
                if (act_ == "fork_orphan_setsid" || act_ == "fork_orphan_daemon") ::setsid();
                if (act_ == "fork_orphan_setpgid") ::setpgid(0, 0);
                if (act_ == "fork_orphan_daemon" && ::fork() != 0) ::_exit(0);
                ::usleep(static_cast<useconds_t>(orphan_ms_) * 1000);
                std::ofstream(orphan_path_) << "written by a child the plugin forked\n";
                ::_exit(0);
            }
        } else if (act_ == "ignore_signals") {
            std::signal(SIGINT, SIG_IGN);
            std::signal(SIGTERM, SIG_IGN);
            std::ofstream(pid_file_) << ::getpid() << "\n";
            volatile unsigned long spins = 0;
            for (;;) spins = spins + 1;
        } else if (act_ == "all_minus_inf" && t) {
            for (float& v : t->values_mut()) v = -std::numeric_limits<float>::infinity();
        }
    }

    std::string act_, stage_, phase_;
    long layer_, step_, sleep_ms_, token_, calls_, orphan_ms_;
    std::string trigger_, orphan_path_, pid_file_;
    long logits_calls_ = 0;
    long matched_ = 0;
};

}  // namespace

EMBER_EXPORT_EXPERIMENT(Saboteur)
