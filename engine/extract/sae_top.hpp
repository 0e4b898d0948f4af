// `ember sae top`: the rows of an extraction where one SAE feature fires most, read from
// the run directory alone (its manifest's "sae_features", the dense or sparse arrays, and
// the rows' tokens: the manifest's tokenizer record for a prompt, rows.jsonl for a dataset).
//
//   const TopRows top = extract::top_feature_rows(dir, {.feature = 41, .k = 10});
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ember::extract {

struct TopRequest {
    std::size_t feature = 0;
    std::size_t k = 10;
    // Which SAE of the run ("sae_features" index or the SAE's name); needed when it has several.
    std::optional<std::string> sae;
};

struct TopRow {
    std::size_t row = 0;      // in the feature array
    float value = 0.0f;
    std::size_t sample = 0;   // dataset sample index (0 for a prompt)
    std::string sample_id;    // the sample's id as rows.jsonl gives it ("" for a prompt)
    std::size_t position = 0;
    std::int64_t token = 0;
    std::string piece;        // the token's text (\xNN escapes where it is not valid UTF-8)
    std::size_t byte_start = 0, byte_end = 0;
};

struct TopRows {
    std::string sae_name;
    std::size_t sae_index = 0;
    std::size_t d_sae = 0;
    std::size_t rows = 0;     // rows in the run
    std::size_t firing = 0;   // rows where the feature is nonzero
    std::vector<TopRow> top;  // the k largest nonzero values, largest first (ties: lower row)
};

// ember::Error naming the directory and what is missing (no manifest, no SAE features, a
// feature past d_sae, an unknown SAE), or the file that does not hold what the manifest says.
TopRows top_feature_rows(const std::filesystem::path& dir, const TopRequest& request);

}  // namespace ember::extract
