// A hostile experiment for the supervision tests (tests/run/supervise_test.cpp), built by
// the test as an outside author builds one: `g++ -std=c++20 -shared -fPIC -I<sdk> hostile.cpp`.
//
// Config:
//   act   = "segv" | "abort" | "exit0" | "quick_exit" | "loop" | "overrun" | "sleep"
//           | "log" (hostile log lines) | "plus_inf" | "all_minus_inf"
//   stage = "create" | "before_layer" | "after_mlp" | "after_logits" | "destroy"   where it acts
//   phase = "prefill" | "decode" (default: either), layer = N (default: any), step = N
//   sleep_ms = N (act = "sleep": each call at the stage sleeps this long)
//   token = N (act = "plus_inf": the logit set to +inf; "plus_inf_2" also sets token + 1)
#include <ember/experiment.hpp>

#include <chrono>
#include <cmath>
#include <csignal>
#include <limits>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

class Hostile : public ember::Experiment {
public:
    explicit Hostile(const ember::ExperimentConfig& config)
        : act_(config.get_string("act", "segv")),
          stage_(config.get_string("stage", "after_mlp")),
          phase_(config.get_string("phase", "")),
          layer_(config.get_int("layer", -1)),
          step_(config.get_int("step", -1)),
          sleep_ms_(config.get_int("sleep_ms", 0)),
          token_(config.get_int("token", 0)) {
        if (stage_ == "create") strike(nullptr);
    }
    ~Hostile() override {
        if (stage_ == "destroy") strike(nullptr);
    }
    const char* name() const override { return "hostile"; }

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
        strike(&t);
        return {};
    }

    void strike(ember::TensorAccess* t) {
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
        } else if (act_ == "all_minus_inf" && t) {
            for (float& v : t->values_mut()) v = -std::numeric_limits<float>::infinity();
        }
    }

    std::string act_, stage_, phase_;
    long layer_, step_, sleep_ms_, token_;
    long logits_calls_ = 0;
};

}  // namespace

EMBER_EXPORT_EXPERIMENT(Hostile)
