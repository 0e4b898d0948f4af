// Test plugin: sleeps in after_mlp (config sleep_ms, default 50), at every layer and phase.
#include <ember/experiment.hpp>

#include <chrono>
#include <thread>

namespace {

class Slow : public ember::Experiment {
public:
    explicit Slow(const ember::ExperimentConfig& config) : sleep_ms_(config.get_int("sleep_ms", 50)) {}
    const char* name() const override { return "slow"; }
    ember::Status after_mlp(const ember::LayerContext&, ember::TensorAccess&) override {
        std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms_));
        return {};
    }

private:
    long sleep_ms_;
};

}  // namespace

EMBER_EXPORT_EXPERIMENT(Slow)
