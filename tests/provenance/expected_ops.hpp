// The execution structure of one evaluation derived independently of the engine's
// family code: from the hyperparameters (ModelConfig) and which optional tensors the
// file holds, the operations each family must run, in order, with their shapes. The
// trace tests compare journals against it and pin fingerprints computed from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "kernels/ops.hpp"
#include "models/model_config.hpp"
#include "trace/fingerprint.hpp"

namespace ember::test {

struct ExpectedOp {
    std::string name;
    kernels::OpKind kind;
    std::int32_t layer;  // -1: model-level
    trace::Shape input;
    trace::Shape output;
};

// The operations of one evaluation of T tokens; the logits are computed for the last row,
// or for every row with all_logits.
std::vector<ExpectedOp> expected_evaluation(const gguf::File& file, const models::ModelConfig& config, std::size_t T,
                                            bool all_logits);

// The sampling step generate() reports after each evaluation.
ExpectedOp expected_sampling(const models::ModelConfig& config);

// The fingerprint of a sequence of expected operations (trace/fingerprint.hpp).
std::string fingerprint_of(const std::vector<ExpectedOp>& ops);

}  // namespace ember::test
