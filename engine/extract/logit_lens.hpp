// The logit lens: the residual stream leaving a layer (after_layer) read out as if it
// were the last layer, through the model's own final norm and LM head (Model::unembed,
// Gemma's soft-cap included), keeping the top K tokens per position. At the last layer
// this is exactly the logits the model computes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "extract/extractor.hpp"
#include "models/model.hpp"
#include "runtime/session.hpp"

namespace ember::extract {

struct LensLayer {
    std::uint32_t layer = 0;
    std::vector<std::size_t> positions;
    std::size_t k = 0;
    std::vector<std::int32_t> ids;  // [positions, k], best first (ties: lower id first; NaN last)
    std::vector<float> logits;      // [positions, k]
};

// One LensLayer per source (Extractor::lens_sources()), computed on `route` with `threads`
// oneTBB threads. ember::Error when k exceeds the vocabulary.
std::vector<LensLayer> logit_lens(const models::Model& model, runtime::Route route, std::size_t threads,
                                  const std::vector<Capture>& sources, std::size_t k);

// The k best (id, logit) of one row of logits, best first.
void top_k(const float* logits, std::size_t n_vocab, std::size_t k, std::int32_t* ids, float* values);

}  // namespace ember::extract
