// A plugin whose static constructor crashes while the library is loaded
// (tests/run/supervise_test.cpp); built with -DEXIT_ON_LOAD it calls exit(0) instead,
// with -DLOOP_ON_LOAD it never returns (tests/run/supervise_hardening_test.cpp).
#include <ember/experiment.hpp>

#include <cstdlib>

namespace {

struct CrashOnLoad {
    CrashOnLoad() {
#if defined(EXIT_ON_LOAD)
        std::exit(0);
#elif defined(LOOP_ON_LOAD)
        volatile unsigned long spins = 0;
        for (;;) spins = spins + 1;
#else
        volatile int* nowhere = nullptr;
        *nowhere = 1;
#endif
    }
} crash_on_load;

class CtorCrash : public ember::Experiment {
public:
    explicit CtorCrash(const ember::ExperimentConfig&) {}
    const char* name() const override { return "ctor-crash"; }
};

}  // namespace

EMBER_EXPORT_EXPERIMENT(CtorCrash)
