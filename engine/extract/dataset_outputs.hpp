// The files of a dataset run (docs/formats.md, "Dataset run directory") and its resume
// point. Arrays, rows.jsonl, samples.jsonl and the targets grow batch by batch as
// NAME.partial files; after each finished batch checkpoint() flushes them and records
// their sizes in progress.json (written atomically). A new process given the same run
// key cuts every file back to those sizes and goes on after the last finished batch, so
// the finished directory is byte for byte what an uninterrupted run writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "record/partial_file.hpp"
#include "hooks/hooks.hpp"

namespace ember::extract {

inline constexpr const char* kProgressName = "progress.json";

// One stacked array: which capture feeds it.
struct ArrayPlan {
    // Sae*: SAE `sae`'s features (sae_extraction.hpp): dense [R, d_sae], or sparse, three
    // 1-D arrays (indptr [R + 1] int64, indices int32 and values float32 [nnz]).
    enum class Source { Stage, Logits, LensIds, LensLogits, SaeDense, SaeIndptr, SaeIndices, SaeValues };
    std::string name;  // after_layer.layer3.npy, before_logits.npy, logits.npy, logit_lens.layer3.ids.npy
    Source source = Source::Stage;
    hooks::Stage stage = hooks::Stage::AfterLayer;
    std::optional<std::uint32_t> layer;
    std::string descr;  // "<f4" | "<i4"
    std::size_t cols = 0;
    // attention_pattern: n_head heads per selected row, each the sample's n_kv weights
    // followed by zeros up to `cols` (the dataset's longest evaluation): [R, n_head, cols].
    std::size_t rows_per_row = 1;
    std::size_t sae = 0;  // Source::Sae*: the index in the run's [[sae]] list
    // The array's shape after its row count: {} (1-D, cols 0), {cols}, or attention_pattern's {n_head, cols}.
    std::vector<std::size_t> row_shape() const {
        if (rows_per_row > 1) return {rows_per_row, cols};
        if (cols == 0) return {};
        return {cols};
    }
};

// Where a run stands: samples, rows and tokens done.
struct RunPoint {
    std::size_t samples = 0;
    std::size_t rows = 0;
    std::size_t tokens = 0;
    std::size_t evaluated = 0;  // the rows evaluated: `tokens`, or fewer (Prepared::evaluated_rows)
    std::size_t skipped = 0;
};
RunPoint operator-(const RunPoint& a, const RunPoint& b);
RunPoint& operator+=(RunPoint& a, const RunPoint& b);

class DatasetOutputs {
public:
    // Opens the files in `dir`: resumed when progress.json is there with the same
    // `run_key`, fresh otherwise (an earlier run's progress and partial files are replaced).
    DatasetOutputs(std::filesystem::path dir, std::vector<ArrayPlan> arrays, bool targets, std::string run_key);

    const RunPoint& resumed_at() const { return resumed_; }  // all zero for a fresh run
    bool resumed() const { return resumed_.samples > 0; }

    record::NpyAppender& array(std::size_t i) { return *arrays_[i]; }
    const std::vector<ArrayPlan>& plans() const { return plans_; }
    record::PartialFile& rows() { return *rows_; }
    record::PartialFile& samples() { return *samples_; }
    record::PartialFile* targets_jsonl() { return targets_jsonl_.get(); }
    record::NpyAppender* targets_npy() { return targets_npy_.get(); }

    // Flushes every file and records `point` as the place to resume from.
    void checkpoint(const RunPoint& point);
    // Renames every file into place and removes progress.json.
    void finish();
    // The file names, in the order the manifest lists them.
    std::vector<std::string> file_names() const;

private:
    std::filesystem::path dir_;
    std::vector<ArrayPlan> plans_;
    std::string run_key_;
    RunPoint resumed_;
    std::vector<std::unique_ptr<record::NpyAppender>> arrays_;
    std::unique_ptr<record::PartialFile> rows_, samples_, targets_jsonl_;
    std::unique_ptr<record::NpyAppender> targets_npy_;
};

}  // namespace ember::extract
