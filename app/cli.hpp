// What every subcommand shares: option parsing with Boost.program_options, the exit
// codes (0 ok, 1 the work failed, 2 bad usage), JSON printing.
#pragma once

#include <boost/json.hpp>
#include <boost/program_options.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_pretty.hpp"
#include "models/model_config.hpp"

namespace ember::app {

namespace po = boost::program_options;

enum ExitCode : int { kExitOk = 0, kExitFailure = 1, kExitUsage = 2 };

// Parses `args` (without the subcommand name) against `options`, with `positional`
// names mapped in order. Throws ember::UsageError on unknown or malformed options.
// Returns false when --help was given (usage already printed).
bool parse_options(const std::string& command, const std::vector<std::string>& args,
                   const po::options_description& options, const po::positional_options_description& positional,
                   po::variables_map& vm);

// --arch auto|llama|qwen3|gemma4 -> nullopt for auto; UsageError for anything else.
std::optional<models::Family> parse_arch(const std::string& arch);

// The whole file's bytes; ember::Error "PATH: cannot open WHAT" when it cannot be read.
std::string read_file(const std::filesystem::path& path, std::string_view what);

// Reads --prompt TEXT or --file PATH (exactly one); UsageError otherwise.
std::string read_prompt(const po::variables_map& vm);

// pretty_json (a JSON value indented two spaces a level, arrays of scalars on one line)
// is ember::pretty_json from common/json_pretty.hpp.

// Pretty-prints a JSON value followed by a newline to stdout.
void print_json(const boost::json::value& value);

}  // namespace ember::app
