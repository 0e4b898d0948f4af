// The run config parser below load_run_config, for callers that build the TOML document
// themselves (grid expansion: a sweep file's base with one grid point substituted).
#pragma once

#include <toml++/toml.h>

#include <filesystem>

#include "config/run_config.hpp"

namespace ember::config {

// The file parsed as TOML; a syntax error is an ember::Error naming file:line:column.
toml::table parse_config_file(const std::filesystem::path& file);

// `root` read as the run config in `file` (messages name `file`; relative paths are
// resolved against its directory), exactly as load_run_config reads the file itself.
RunConfig run_config_from_toml(const toml::table& root, const std::filesystem::path& file,
                               const LoadOptions& options = {});

}  // namespace ember::config
