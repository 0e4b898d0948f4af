// A plugin whose static constructor crashes while the library is loaded (tests/run/supervise_test.cpp).
#include <ember/experiment.hpp>

namespace {

struct CrashOnLoad {
    CrashOnLoad() {
        volatile int* nowhere = nullptr;
        *nowhere = 1;
    }
} crash_on_load;

class CtorCrash : public ember::Experiment {
public:
    explicit CtorCrash(const ember::ExperimentConfig&) {}
    const char* name() const override { return "ctor-crash"; }
};

}  // namespace

EMBER_EXPORT_EXPERIMENT(CtorCrash)
