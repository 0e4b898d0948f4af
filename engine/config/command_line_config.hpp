// An experiment's config given on the command line (`--experiment P.so --experiment-config
// KEY=VALUE ... | FILE.toml`, docs/run-config.md "Experiments on the command line"): the
// same table an [experiment.config] would hold, as canonical JSON.
//
//   experiment_config_from_items({"stage=after_mlp", "layers=[3]", "scale=0.5"})
//     -> {"layers":[3],"scale":0.5,"stage":"after_mlp"}
//
// VALUE is typed as TOML types it (`3` an integer, `0.5` a float, `true`, `[1, 2]`,
// `{a = 1}`, `"quoted"`); text that is no TOML value is a string (`after_mlp`). KEY may be
// dotted (`a.b=1` sets b in table a). A FILE.toml item (no '=') adds its whole table.
#pragma once

#include <string>
#include <vector>

namespace ember::config {

// The items' table as canonical JSON ("{}" for none). ember::UsageError naming the item
// and the key: a key that is not a TOML key, set twice (by two items, or a file and an
// item), or a value JSON cannot carry (NaN, infinity); ember::Error for a file that cannot
// be read or is not TOML (file:line:column).
std::string experiment_config_from_items(const std::vector<std::string>& items);

}  // namespace ember::config
