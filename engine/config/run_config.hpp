// The run config: one TOML file saying what `ember run` does (docs/run-config.md lists
// every key and default). Parsing is strict: an unknown key, a wrong type or a value out
// of range is an ember::Error naming `file:line:column`. Paths are resolved against the
// directory of the file that holds them and stored absolute.
//
// Experiments compose in a fixed order: the defaults file's [[experiment]] entries, then
// the config's, then each --experiment from the command line.
//
// The config hash is the SHA-256 of canonical_json(): the parsed config with defaults
// filled in, paths resolved and keys sorted, so configs that mean the same hash the same.
// Settings that cannot change a result (model.threads, output.overwrite) are recorded in
// to_json() but left out of the hash: changing --threads never forces a sweep to re-run.
#pragma once

#include <boost/json/object.hpp>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/build_options.hpp"
#include "config/shard.hpp"

namespace ember::config {

// Ranges that a config key and the command-line option setting the same thing share.
inline constexpr std::int64_t kMaxThreads = 4096;                                // model.threads, --threads
inline constexpr std::int64_t kMaxSeed = std::numeric_limits<std::int64_t>::max();  // generation.seed, --seed

enum class FailurePolicy { Strict, FailOpen };
enum class AddBos { Auto, Yes, No };

struct ModelSection {
    std::filesystem::path path;        // required
    std::string arch = "auto";         // auto | llama | qwen3 | gemma4
    std::string route = has_fast_route() ? "fast" : "reference";  // fast | reference (common/build_options.hpp)
    std::string kv_type = "f32";       // f32 | f16: the KV cache's element type
    std::uint32_t threads = 0;         // 0 = every available core
    std::uint32_t ctx = 0;             // context window in tokens; 0 = min(4096, the model's training context)
};

struct PromptSection {
    std::optional<std::string> text;            // exactly one of text, file and a conversation (chat)
    std::optional<std::filesystem::path> file;
    AddBos add_bos = AddBos::Auto;              // auto: as the model's tokenizer metadata says
    // A conversation rendered with a chat template (docs/chat.md): the template's variables
    // (messages, add_generation_prompt, enable_thinking, tools), from [prompt] messages = [...]
    // or --chat VARS.json; the template `template = "FILE"`, else the model's
    // tokenizer.chat_template (.NAME with template_name).
    std::optional<boost::json::object> chat;
    std::optional<std::filesystem::path> chat_template;
    std::optional<std::string> chat_template_name;
    // The prompt as token ids ([prompt] ids = [...] or --ids 1,2,3), instead of a text:
    // checked against the vocabulary, its text the ids' pieces joined.
    std::optional<std::vector<std::int32_t>> ids;
    bool special = false;               // parse special-token texts (<|eot_id|>) in the text (--special)
    std::optional<std::string> target;  // a continuation scored by teacher forcing (--target; docs/extraction.md)
};

struct GenerationSection {
    std::uint32_t max_tokens = 32;
    double temperature = 0.0;  // 0 = greedy
    std::uint32_t top_k = 40;  // sampling: the K best tokens (0 = all)
    double top_p = 0.95;       // sampling: the smallest set holding this probability mass (1 = all)
    std::uint64_t seed = 42;
};

struct TracingSection {
    bool enabled = false;
    std::filesystem::path path;  // default: <output.dir>/trace.jsonl
};

// Which prompt positions an extraction keeps: all, last, a list, or a selection spec
// anchored to the prompt's text (ember/selection.hpp: `substring:كتب:last`, `bytes:4-9`...).
struct PositionSelection {
    enum class Kind { All, Last, List, Spec };
    Kind kind = Kind::All;
    std::vector<std::uint32_t> list;  // Kind::List: the positions, as written
    std::string spec;                 // Kind::Spec: the spec's text form
};

// Which rows' logits an extraction writes: none, the last, every row, or the selected rows.
enum class LogitsDump { None, Last, All, Selected };

// How an extraction writes each [[sae]]'s features (docs/features.md, docs/formats.md):
// dense [R, d_sae] float32, or sparse (CSR: indptr, indices, values).
enum class SaeOutput { Dense, Sparse };

// Where the run writes, and what a hidden-state extraction records (docs/extraction.md).
// `ember extract` always extracts; `ember run` when `extract` is true.
struct OutputSection {
    std::filesystem::path dir;  // default: runs/<config file name without .toml>, beside the config
    bool extract = false;
    std::vector<std::string> stages = {"after_layer"};  // hook stage names, in the order given
    std::optional<std::vector<std::uint32_t>> layers;   // nullopt: every layer
    PositionSelection positions;  // `positions`, or `select` (a spec) in the TOML
    LogitsDump logits = LogitsDump::None;
    std::uint32_t logit_lens = 0;  // top-K per position and chosen layer; 0 = off
    bool overwrite = false;        // replace a directory holding an earlier run (--overwrite)
    SaeOutput sae_output = SaeOutput::Dense;  // `sae_output`: the [[sae]] features' layout
};

std::string_view logits_dump_name(LogitsDump dump);  // "none" | "last" | "all" | "selected"
// The output section's extraction keys as JSON (what the manifest and run.json record).
boost::json::object extraction_json(const OutputSection& output);

// A research dataset (`ember extract --dataset`, docs/extraction.md): many prompts in one
// process. The [output] extraction keys apply to every sample; `select` is the default
// selection spec a sample's own "select" overrides.
struct DatasetSection {
    std::optional<std::filesystem::path> path;  // JSONL or .txt; none: a single-prompt run
    std::string select = "last";                // a selection spec (ember/selection.hpp)
    std::uint32_t batch_tokens = 0;             // tokens per evaluation; 0: the default (kDefaultBatchTokens)
    bool skip_empty = false;                    // on_empty = "skip": a sample selecting nothing is recorded, not an error
    // evaluate = "whole": every sample's every row evaluated, even those after its last
    // selected row that no output reads ("needed", the default; the same values either way)
    bool evaluate_whole = false;
    // special = true (`ember extract --dataset --special`): special-token texts
    // (<|eot_id|>) in a sample's text and target are those tokens, as [prompt] special is
    // for one prompt. A conversation's rendering parses them either way.
    bool special = false;
    // `shard = "K/N"`: this run is shard K of N of the unsharded run's batches of samples
    // (`ember extract --shard K/N`); `ember merge` joins the N into the unsharded run.
    std::optional<Shard> shard;
    // `shards = N` (N > 1): `ember sweep` does this run as N shard runs, each into
    // `<output.dir>.shard-K-of-N`, then merges them into output.dir (docs/sweep.md). Not
    // part of the run's own record: each shard run has `shard` instead.
    std::uint32_t shards = 0;
};
inline constexpr std::uint32_t kDefaultBatchTokens = 512;

struct HooksSection {
    FailurePolicy failure = FailurePolicy::Strict;
    std::uint32_t timeout_ms = 0;     // 0 = no timeout
    std::uint32_t run_timeout_s = 0;  // the whole supervised run; 0 = no limit
    bool defaults = true;             // false: the defaults file's experiments are left out
};

struct ExperimentEntry {
    std::filesystem::path plugin;            // absolute
    std::string config_json = "{}";          // the [experiment.config] table, canonical JSON
    std::filesystem::path base_dir;          // relative paths inside config_json are relative to this
    std::string origin;                      // where it was declared: "file:line" or "--experiment N"
};

// [[sae]]: an SAE or transcoder loaded into the run and spliced at its site (docs/features.md).
struct SaeEntry {
    std::filesystem::path path;       // absolute: the SAE's directory (or Gemma Scope's params.npz)
    std::optional<std::string> site;  // overrides the file's hook name ("after_layer:12")
    bool splice = true;               // false: features are read, the site never changed
};

// [attribute]: the run is `ember attribute`'s (docs/attribution.md) instead of a
// generation: gradients of a metric on the prompt's continuation, at the [output] stages,
// layers and positions / select (every selection spec), into output.dir. With [dataset],
// every sample is one such run; a line's `corrupt` (and `corrupt_select`) is its pair.
struct AttributeSection {
    std::string target;                           // required (a dataset line's `target` overrides it)
    std::string metric = "logprob";               // logprob | logit-diff | prob
    std::optional<std::string> contrast;          // logit-diff's B
    std::optional<std::string> corrupt;           // attribution patching against this prompt
    // Which rows of the corrupted prompt patch the selected rows of the clean one (the k-th
    // onto the k-th, as patch's source_select / target_select): a selection spec resolved
    // in the corrupted prompt. None: position p onto position p (the prompts must align).
    std::optional<std::string> corrupt_select;
    std::string method = "atp";                   // atp | ig
    std::uint32_t steps = 16;                     // ig: the path's steps
    std::uint32_t verify_top = 0;                 // real patching of the K top sites
};

struct RunConfig {
    std::filesystem::path source;  // the config file, absolute
    ModelSection model;
    PromptSection prompt;
    GenerationSection generation;
    TracingSection tracing;
    OutputSection output;
    DatasetSection dataset;
    HooksSection hooks;
    std::vector<ExperimentEntry> experiments;  // composed: defaults file, config, command line
    std::vector<SaeEntry> saes;                // [[sae]] entries, then --sae
    std::optional<AttributeSection> attribute; // [attribute]: an attribution run
    std::optional<std::filesystem::path> defaults_file;  // the defaults file composed, if any (an input)
};

struct LoadOptions {
    // The defaults file to compose first (see find_defaults_file); none when empty.
    std::optional<std::filesystem::path> defaults_file;
    // --experiment plugins, resolved against the current directory.
    std::vector<std::filesystem::path> command_line_experiments;
    // Their configs (--experiment-config), canonical JSON, one per experiment; none: all "{}".
    std::vector<std::string> command_line_configs;
    // --no-defaults: leave the defaults file out (as [hooks] defaults = false).
    bool no_defaults = false;
};

RunConfig load_run_config(const std::filesystem::path& file, const LoadOptions& options = {});

// $EMBER_DEFAULTS when set (an error if that file does not exist), else
// $XDG_CONFIG_HOME/ember/defaults.toml, else ~/.config/ember/defaults.toml, when present.
std::optional<std::filesystem::path> find_defaults_file();

// The [[experiment]] entries of a defaults file (it may hold nothing else).
std::vector<ExperimentEntry> load_defaults_file(const std::filesystem::path& file);

// The parsed config as JSON (defaults filled in, paths absolute); what run.json records.
boost::json::object to_json(const RunConfig& config);
std::string canonical_json(const RunConfig& config);  // without the unhashed settings
std::string config_hash(const RunConfig& config);     // SHA-256 hex of canonical_json
// The config hash of a config given as to_json() writes it (a manifest's "config").
std::string config_hash(const boost::json::object& config_json);

std::string_view failure_policy_name(FailurePolicy policy);  // "strict" | "fail_open"

}  // namespace ember::config
