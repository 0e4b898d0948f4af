// The inputs record (docs/formats.md, "Inputs"): every file a run reads, by content, in
// run.json and in the manifest, so that a result is keyed on what it was made from and not
// only on its config. Each input has a role, an absolute path and the SHA-256 of its bytes
// (through the digest cache, common/digest_cache.hpp):
//   model, prompt_file, defaults_file, plugin (each experiment's .so), experiment_file (a
//   file an experiment's config names: a steering vector), experiment_source (a directory
//   with a sealed manifest an experiment's config names: a patch source; recorded by its
//   manifest.json's bytes, with that manifest's run_id and manifest_sha256 seal), and
//   dataset (a dataset run's file), experiment_read (a file an experiment read through
//   the host's read_input, plugin.h 1.4: hashed from the bytes it got).
// A string in an [experiment.config] table is taken for a path when, resolved against the
// experiment's base directory, it names an existing file or a directory holding a
// manifest.json.
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/file_state.hpp"
#include "common/mapped_file.hpp"
#include "config/run_config.hpp"
#include "experiments/experiment_runner.hpp"

namespace ember::record {

struct InputFile {
    std::string role;
    std::filesystem::path path;  // absolute
    std::string sha256;
    std::uint64_t bytes = 0;
    std::string key;                          // experiment inputs: "experiments[1].config.vector"
    std::optional<std::string> run_id;        // experiment_source: the source's run id
    std::optional<std::string> manifest_seal; // experiment_source: its manifest_sha256
    FileState state;                          // the file's state when it was hashed (or mapped)
};

// One input file hashed now. ember::Error naming the path when it cannot be read.
InputFile input_file(const std::string& role, const std::filesystem::path& path);

// Every input `config` names. `model_sha256` (what a loaded model hashed to) is used for the
// model instead of hashing it again, when given, with `model_state` the state of the file
// it was read from (its mapping's; the file's state now when not given).
std::vector<InputFile> collect_inputs(const config::RunConfig& config,
                                      const std::optional<std::string>& model_sha256 = std::nullopt,
                                      const std::optional<FileState>& model_state = std::nullopt);

// Inputs are what was read: called at the end of a run, before anything is recorded.
// ember::Error naming the first input that changed while the run read it: a file whose
// state differs from `inputs`' and whose bytes now hash differently ("PATH: the dataset
// changed during the run (sha256 NEW, the run read OLD); nothing is recorded"), or that is
// gone; and the model's mapping, when given, if a read found the file truncated
// (common/mapped_file.hpp). A file written again with the same bytes is unchanged.
void check_inputs_unchanged(const std::vector<InputFile>& inputs, const MappedFile* model_mapping = nullptr);

// The paths of the files a run reads (model, config file, prompt file, dataset, defaults
// file, every plugin), without hashing them: what overwrite must never delete.
std::vector<std::filesystem::path> input_paths(const config::RunConfig& config);

// The one check of a run config's outputs, made up front by every command that runs one
// (common/output_path.hpp): [output] dir names nothing or a directory, [tracing] path
// (when tracing) nothing or a regular file, and when the run may replace its output
// directory (`overwrite`, or [output] overwrite), that directory holds none of its inputs.
// ember::Error naming the key and the path.
void check_run_outputs(const config::RunConfig& config, bool overwrite);

boost::json::array inputs_json(const std::vector<InputFile>& inputs);

inline constexpr std::string_view kExperimentReadRole = "experiment_read";

// Appends to an inputs record the files the experiments read through the host (their
// records' read_inputs), role experiment_read, key "experiments[I]".
void add_read_inputs(boost::json::array& inputs, const experiments::RunnerSnapshot& snapshot);

// "" when `recorded` (an inputs record read back) names the same inputs with the same
// digests as `current`; otherwise what differs, naming the input ("model /m.gguf changed
// (sha256 ab12... was 9f00...)").
std::string inputs_difference(const boost::json::array& recorded, const std::vector<InputFile>& current);

// Why the result in `config`'s output directory makes running it again unnecessary (it
// verifies, has `config_hash`, and every input it recorded has the digest the input has
// now), or nullopt. What `ember sweep` skips by.
std::optional<std::string> current_result(const config::RunConfig& config, const std::string& config_hash);

}  // namespace ember::record
