// The file joins of `ember merge` (dataset_merge.hpp): one output file from the file of
// the same name in every shard directory, in shard order, written to a temporary name
// and renamed, and its record (bytes and SHA-256) for the merged manifest.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "record/run_directory.hpp"

namespace ember::extract {

struct JoinedFile {
    record::FileRecord record;
    std::size_t rows = 0;  // .npy: the merged row count
};

// One .npy: a header with the summed row count (as the unsharded run's NpyAppender writes
// it), then every shard's data in order. Refuses arrays that do not stack (dtype, or a
// shape after the row count that differs). `buffer` is the copy buffer.
JoinedFile join_npy(const std::vector<std::filesystem::path>& shards, const std::string& name,
                    const std::filesystem::path& dir, std::vector<char>& buffer);

// A sparse SAE array's indptr (int64 [R + 1], each shard's from 0): the indptr the
// unsharded run writes. `values` names the entry's values file, whose nonzero count each
// shard's last entry must equal.
JoinedFile join_indptr(const std::vector<std::filesystem::path>& shards, const std::string& name,
                       const std::string& values, const std::filesystem::path& dir);

// One .jsonl: every shard's lines in order.
JoinedFile join_lines(const std::vector<std::filesystem::path>& shards, const std::string& name,
                      const std::filesystem::path& dir, std::vector<char>& buffer);

}  // namespace ember::extract
