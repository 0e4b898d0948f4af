// What a configured attribution run is asked (ConfiguredOptions) and what it reports
// (ConfiguredAttribution): shared by configured_run.hpp and dataset_attribution.hpp.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>

namespace ember::attribution {

struct ConfiguredAttribution {
    std::filesystem::path dir;
    std::string run_id;
    std::size_t samples = 0;     // 1 for a single prompt
    std::size_t resumed_samples = 0;  // a dataset run's samples an interrupted run had finished
    std::size_t prompt_tokens = 0;    // a dataset run's: summed over its samples
    std::size_t arrays = 0;
    double metric = 0.0;         // a single prompt's; a dataset run's first sample's
    double forward_ms = 0.0, backward_ms = 0.0;
};

struct ConfiguredOptions {
    bool overwrite = false;  // as [output] overwrite
    std::string run_id;      // the manifest's run_id (app's make_run_id); an interrupted dataset run resumed keeps its own
    // A dataset run: called after each finished sample with the number finished (tests stop a run here).
    std::function<void(std::size_t)> on_sample;
};

}  // namespace ember::attribution
