// What every subcommand shares: option parsing with Boost.program_options, the exit
// codes (0 ok, 1 the work failed, 2 bad usage), paths as options give them, timing, JSON
// printing.
#pragma once

#include <boost/json.hpp>
#include <boost/program_options.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "record/json_pretty.hpp"
#include "config/run_config.hpp"
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

// --arch auto|llama|qwen3|gemma4 (the family registry's names) -> nullopt for auto;
// UsageError for anything else.
std::optional<models::Family> parse_arch(const std::string& arch);
// --arch's help text: "expected architecture: auto|llama|qwen3|gemma4".
std::string arch_help();

// The options of every command that runs a model (generate, bench, extract, run): --model,
// --route, --threads, --ctx, --kv-type and --arch, with one help text each and the run
// config's [model] defaults (config::ModelSection), so each means the same everywhere.
po::options_description model_options();
// Checks the model options and writes them into a run config's [model] section: every one
// (their defaults too), or with `only_given` only those on the command line (ember run,
// over its config). UsageError names the option; --model is made absolute.
void apply_model_options(const po::variables_map& vm, config::ModelSection& model, bool only_given);

// The whole file's bytes; ember::Error "PATH: cannot open WHAT" when it cannot be read.
std::string read_file(const std::filesystem::path& path, std::string_view what);

// The prompt options of every command that reads a prompt: --prompt TEXT, --file PATH,
// --ids 1,2,3 (the prompt as token ids), --no-bos and --special (parse special-token
// texts). `ids_option` names the ids option: tokenize, whose --ids is its output format,
// calls it --prompt-ids.
po::options_description prompt_options(const std::string& ids_option = "ids");
// Reads --prompt TEXT or --file PATH (exactly one); UsageError otherwise.
std::string read_prompt(const po::variables_map& vm);
// "1,2,3" -> the ids; UsageError naming `option` and the item that is not an id >= 0.
std::vector<std::int32_t> parse_ids(const std::string& text, const std::string& option);
// Writes the prompt options given into a run config's [prompt]: --prompt (text), --file
// (made absolute) or the ids option (exactly one of them when `required`, else at most
// one, replacing the config's prompt), --no-bos, --special. UsageError for --no-bos with
// ids (the ids are the sequence as given).
void apply_prompt_options(const po::variables_map& vm, config::PromptSection& prompt, bool required,
                          const std::string& ids_option = "ids");
// --target TEXT (extract, run, generate): a continuation scored by teacher forcing.
po::options_description target_options();

// --chat VARS.json (a conversation: the chat template's variables), --template FILE.jinja
// (the template; default: the model's tokenizer.chat_template) and --template-name NAME
// (tokenizer.chat_template.NAME), for every command that reads a prompt (docs/chat.md).
po::options_description chat_options();
// Whether --chat was given; UsageError when it is combined with --prompt / --file, or
// --template / --template-name are given without it.
bool chat_requested(const po::variables_map& vm);
// With --chat: the run config's prompt becomes the conversation (text, file and add_bos
// cleared; a --target kept: it continues the rendering), with --template (made absolute)
// or --template-name.
void apply_chat_options(const po::variables_map& vm, config::PromptSection& prompt);

// --experiment-config KEY=VALUE | FILE.toml (repeatable), each configuring the --experiment
// before it (config/command_line_config.hpp).
po::options_description experiment_config_options();
// Per --experiment, in the order given, its config as canonical JSON ("{}": none). Reads
// the order from `args`; UsageError for an --experiment-config before any --experiment, or
// an abbreviated option name (the order could not be read).
std::vector<std::string> experiment_configs(const std::vector<std::string>& args, const po::variables_map& vm);

// pretty_json (a JSON value indented two spaces a level, arrays of scalars on one line)
// is ember::pretty_json from record/json_pretty.hpp.

// Pretty-prints a JSON value followed by a newline to stdout.
void print_json(const boost::json::value& value);

// A path option as stored in a config: absolute, lexically normal (no "." or "..").
std::filesystem::path absolute_path(const std::string& path);

// Wall-clock seconds since `start` (steady clock), as the timing commands report them.
double seconds_since(std::chrono::steady_clock::time_point start);

}  // namespace ember::app
