// `ember sweep --shard K/N` and `ember extract --dataset --shard K/N`: the K-th of N
// deterministic slices (config/shard.hpp has the partition, shared by a sweep's runs and a
// dataset run's batches), parsed from the command line; and the shard runs of a dataset run
// config with `[dataset] shards = N` (docs/sweep.md, "Dataset shards").
#pragma once

#include <fmt/format.h>

#include <filesystem>
#include <string_view>

#include "common/error.hpp"
#include "config/run_config.hpp"
#include "config/shard.hpp"

namespace ember::app {

using config::kMaxShards;
using config::Shard;
using config::shard_range;

// "K/N" with 0 <= K < N <= kMaxShards; UsageError naming `command` otherwise.
inline Shard parse_shard(std::string_view text, std::string_view command = "ember sweep") {
    if (const auto s = config::parse_shard(text)) return *s;
    throw UsageError(fmt::format("{}: --shard {} must be K/N with 0 <= K < N <= {} (K counts from 0)", command, text,
                                 kMaxShards));
}

// Where shard K of N of a run writing `dir` goes: `<dir>.shard-K-of-N` beside it.
inline std::filesystem::path shard_output_dir(std::filesystem::path dir, Shard shard) {
    if (dir.filename().empty()) dir = dir.parent_path();
    return dir.parent_path() / fmt::format("{}.shard-{}-of-{}", dir.filename().string(), shard.index, shard.count);
}

// Shard K of a dataset run config: dataset.shard = K/N, output.dir `<output.dir>.shard-K-of-N`
// (tracing.path, which a dataset run leaves off, stays the unsharded run's). `ember sweep`
// expands `[dataset] shards = N` into these; `ember extract CONFIG --shard K/N` runs one.
inline config::RunConfig dataset_shard_config(config::RunConfig c, Shard shard) {
    c.dataset.shard = shard;
    c.output.dir = shard_output_dir(c.output.dir, shard);
    return c;
}

}  // namespace ember::app
