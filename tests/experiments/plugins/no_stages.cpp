// Test plugin: only the required name(). Every stage pointer in its descriptor is null,
// and it takes no configuration.
#include <ember/experiment.hpp>

class NoStages : public ember::Experiment {
public:
    const char* name() const override { return "no-stages"; }
};

EMBER_EXPORT_EXPERIMENT(NoStages)
