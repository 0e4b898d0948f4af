// Test plugin: writes when its instance lived, "CREATED_NS DESTROYED_NS" on the
// monotonic clock (one clock for every process of the machine, so runs in supervised
// workers compare), to <output dir>/overlap.txt when it is destroyed. Sleeps in
// after_layer (sleep_ms, default 20) so that runs in parallel overlap. Built
// twice: "overlap" (no concurrency declared) and, with OVERLAP_CONCURRENT,
// "overlap-concurrent" (static constexpr bool concurrent = true).
#include <ember/experiment.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace {

long long now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class Overlap : public ember::Experiment {
public:
#ifdef OVERLAP_CONCURRENT
    static constexpr bool concurrent = true;
#endif
    explicit Overlap(const ember::ExperimentConfig& config)
        : sleep_ms_(config.get_int("sleep_ms", 20)), out_(std::string(ember::host().run_info().output_dir)),
          created_ns_(now_ns()) {}
    ~Overlap() override { std::ofstream(out_ + "/overlap.txt") << created_ns_ << " " << now_ns() << "\n"; }
#ifdef OVERLAP_CONCURRENT
    const char* name() const override { return "overlap-concurrent"; }
#else
    const char* name() const override { return "overlap"; }
#endif
    ember::Status after_layer(const ember::LayerContext&, ember::TensorAccess&) override {
        std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms_));
        return {};
    }

private:
    long sleep_ms_;
    std::string out_;
    long long created_ns_;
};

}  // namespace

#ifdef OVERLAP_CONCURRENT
EMBER_EXPORT_EXPERIMENT(Overlap, "overlap-concurrent")
#else
EMBER_EXPORT_EXPERIMENT(Overlap, "overlap")
#endif
