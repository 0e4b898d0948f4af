// One sample of a dataset run as it goes through (dataset_extraction.cpp), and what it
// adds to the run's files: its rows in every array, its lines in rows.jsonl and
// samples.jsonl, its target's score (docs/formats.md, "Dataset run directory").
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "extract/dataset.hpp"
#include "extract/dataset_outputs.hpp"
#include "extract/extractor.hpp"
#include "extract/logit_lens.hpp"
#include "record/manifest.hpp"
#include "runtime/prompt.hpp"
#include "tokenizer/tokenizer.hpp"

namespace ember::extract {

// A sample ready to evaluate: tokenized (prompt and target as one text), its selection
// resolved over the prompt's own tokens.
struct Prepared {
    Sample sample;
    runtime::EncodedPrompt evaluated;             // the prompt, or prompt + target
    std::size_t prompt_tokens = 0;       // the prompt's tokens: the first ones of `evaluated`
    // The rows evaluated, the first ones of `evaluated`: all of them, or, when nothing
    // reads a later row (see Request in dataset_extraction.cpp), up to the last selected
    // one; 0 when skipped.
    std::size_t evaluated_rows = 0;
    std::span<const std::int32_t> evaluated_ids() const { return {evaluated.ids.data(), evaluated_rows}; }
    std::optional<Selection> selection;  // none: skipped (it selects nothing and on_empty = skip)
    std::string skipped;                 // why
};

// What one evaluated sample adds to the outputs.
struct SampleRows {
    const Prepared* prepared = nullptr;
    std::optional<Extractor> extractor;  // none: skipped
    std::vector<LensLayer> lens;
    std::vector<double> target;          // per target token
    std::vector<std::vector<float>> sae_features;  // per [[sae]]: [rows, d_sae] (sae_extraction.hpp)
};

// Appends evaluated samples, in dataset order, to the run's files.
class DatasetRecords {
public:
    DatasetRecords(DatasetOutputs& out, const tokenizer::Tokenizer& tok) : out_(out), tok_(tok) {}
    // The sample's rows (none when skipped), its lines, its target; advances `point`.
    void append(const SampleRows& s, RunPoint& point);

private:
    void append_arrays(const SampleRows& s);
    void append_padded(std::size_t array, const Capture& c, std::size_t rows);
    void append_rows(const SampleRows& s, std::size_t first_row);
    void append_target(const SampleRows& s);

    DatasetOutputs& out_;
    const tokenizer::Tokenizer& tok_;
};

}  // namespace ember::extract
