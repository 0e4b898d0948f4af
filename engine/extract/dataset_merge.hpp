// Dataset shards and `ember merge` (docs/sweep.md, "Dataset shards"; docs/formats.md,
// "Dataset run directory").
//
// A shard (dataset.shard = K/N) evaluates shard K of the unsharded run's batches
// (config/shard.hpp over the batch count: a contiguous range of samples, packed exactly as
// the unsharded run packs them, so every value is the same bits), and writes them with
// their places in the whole dataset: rows.jsonl's `row` and samples.jsonl's `first_row` are the unsharded run's
// numbers. Its manifest ends with a "shard" record. Joining the N shards in K order is
// therefore concatenation: each .npy's data after one header with the summed row count,
// each .jsonl's lines; the manifest is shard 0's with the counts and shapes summed, the
// config the unsharded run's (no dataset.shard, output.dir the merged directory) and its
// config hash. SAE features: dense arrays and CSR indices/values concatenate; each
// CSR indptr drops a later shard's leading 0 and is shifted by the nonzeros before it. The result is byte for byte the directory one unsharded run writes there.
//
//   merge_dataset_shards({"d.shard-0-of-2", "d.shard-1-of-2"}, "d");
#pragma once

#include <boost/json/object.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "config/shard.hpp"

namespace ember::extract {

// What makes two dataset runs the same run wherever they write: a manifest's "config" (as
// config::to_json writes it) without output.dir, tracing.path, dataset.shard and the
// settings that change no result (model.threads, output.overwrite).
boost::json::object unsharded_identity(const boost::json::object& config_json);

// A shard's manifest record: index, count, samples [first, end) of the dataset's
// `dataset_samples`, batches [first, end) of the run's `dataset_batches`, first_row (the
// unsharded run's number of its first row) and run_hash (the SHA-256 of the unsharded
// identity, the dataset's and the model's SHA-256: the same for every shard of one run).
boost::json::object shard_record(config::Shard shard, std::size_t dataset_samples,
                                 std::pair<std::size_t, std::size_t> samples, std::size_t dataset_batches,
                                 std::pair<std::size_t, std::size_t> batches, std::size_t first_row,
                                 const boost::json::object& config_json, const std::string& dataset_sha256,
                                 const std::string& model_sha256);

struct MergeOptions {
    bool overwrite = false;  // replace an earlier run in the output directory
};

struct MergeResult {
    std::filesystem::path dir;
    std::size_t shards = 0;
    std::size_t samples = 0;
    std::size_t rows = 0;
    std::size_t files = 0;
    std::uint64_t bytes = 0;  // written, manifest aside
};

// Joins the shards (in any order) into `out`, streaming (a 1 MiB buffer, whatever the
// arrays' size), every file to a temporary name and renamed, the sealed manifest last.
// Refuses, with an ember::Error naming the directory: one that does not verify (an
// unfinished or changed shard), one that is not a dataset shard, shards of different runs
// (naming the first field that differs and both values), a shard given twice, a shard
// missing, an `out` that is one of the shards.
MergeResult merge_dataset_shards(const std::vector<std::filesystem::path>& shards, const std::filesystem::path& out,
                                 const MergeOptions& options = {});

}  // namespace ember::extract
