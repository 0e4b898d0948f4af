// A sweep file: a base run config plus a [grid] of config keys with lists of values.
// The runs are the cartesian product of the [grid] keys and the [[grid.zip]] groups (the
// keys of one group vary together: prompt pairs); each is an ordinary RunConfig, parsed
// by the run config parser from the base with the run's values put in, so its config
// hash is the hash of the same config written by hand. Each run writes to
// <the base's output.dir>/<name>, the name made of every grid key's value
// ("layers=3,positions=5"; docs/sweep.md, "Run names"). Every error names
// `file:line:column` of the grid key or value at fault.
//
//   [grid]
//   "output.layers" = [[0], [1], [2]]
//   "experiment.patch.config.positions" = [[4], [5]]
//   [[grid.zip]]
//   "prompt.text" = ["clean A", "clean B"]
//   "experiment.patch.config.source" = ["../runs/corrupt-a/capture", "../runs/corrupt-b/capture"]
#pragma once

#include <boost/json/value.hpp>

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "config/run_config.hpp"

namespace ember::config {

// One grid key's value in one run.
struct GridValue {
    std::string key;           // "output.layers", as written in [grid] (dotted)
    boost::json::value value;  // the TOML value as JSON (toml_to_json)
};

struct GridRun {
    std::string name;               // its output directory's name
    std::vector<GridValue> values;  // one per grid key, in Grid::keys order
    RunConfig config;
};

struct Grid {
    std::filesystem::path file;
    std::vector<std::string> keys;   // every grid key (product and zip), sorted
    std::filesystem::path base_dir;  // the base's output.dir (default runs/<file stem>); run i writes base_dir/runs[i].name
    std::vector<GridRun> runs;       // product order: the first dimension varies slowest
};

// A TOML file whose top level has a `grid` key. False for a file that is not TOML at all
// (its error is reported when it is loaded as a run config).
bool is_grid_file(const std::filesystem::path& file);

inline constexpr std::size_t kMaxGridRuns = 100000;

// Expands and parses every run (at most kMaxGridRuns); the first error found stops it.
Grid expand_grid(const std::filesystem::path& file, const LoadOptions& options = {});

// How a value is written in a run name: integers, floats and booleans as themselves,
// arrays as their elements joined by '+', a string as itself when it is short and made
// only of [A-Za-z0-9._-] (and does not start with '.'), otherwise as a short readable
// ASCII part and '~' with 8 hex digits of its SHA-256; tables as '~' and that hash.
std::string grid_value_text(const boost::json::value& value);

}  // namespace ember::config
