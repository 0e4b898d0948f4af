// The "experiments" part of run.json: the policy, every experiment in composition order
// with its descriptor, origin, config, implemented stages, outcome, failure and timings,
// and the failures in the order they happened (the first is the run's error).
#pragma once

#include <boost/json/object.hpp>

#include "experiments/experiment_runner.hpp"

namespace ember::experiments {

boost::json::object experiments_report(const RunnerSnapshot& snapshot);
boost::json::object experiments_report(const ExperimentRunner& runner);

}  // namespace ember::experiments
