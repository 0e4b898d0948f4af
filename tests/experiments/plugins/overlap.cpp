// Test plugin: counts its live instances in this process (a static counter of the .so)
// and writes the largest count it saw to <output dir>/overlap.txt when it is destroyed.
// Sleeps in after_layer (sleep_ms, default 20) so that runs in parallel overlap. Built
// twice: "overlap" (no concurrency declared) and, with OVERLAP_CONCURRENT,
// "overlap-concurrent" (static constexpr bool concurrent = true).
#include <ember/experiment.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace {

std::atomic<int> live{0};
std::atomic<int> most{0};

class Overlap : public ember::Experiment {
public:
#ifdef OVERLAP_CONCURRENT
    static constexpr bool concurrent = true;
#endif
    explicit Overlap(const ember::ExperimentConfig& config)
        : sleep_ms_(config.get_int("sleep_ms", 20)), out_(std::string(ember::host().run_info().output_dir)) {
        const int now = ++live;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
    }
    ~Overlap() override {
        --live;
        std::ofstream(out_ + "/overlap.txt") << most.load() << "\n";
    }
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
};

}  // namespace

#ifdef OVERLAP_CONCURRENT
EMBER_EXPORT_EXPERIMENT(Overlap, "overlap-concurrent")
#else
EMBER_EXPORT_EXPERIMENT(Overlap, "overlap")
#endif
