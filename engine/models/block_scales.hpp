// The load-time check that every block scale of a model file is finite: each tensor of a
// block format in the weight-format table (Q8_0, Q4_0 ... Q6_K) is read once, its scale
// bytes only (kernels/scale_check.hpp). A non-finite one is an ember::Error naming the
// file, the tensor, the block and the scale:
//   "m.gguf: tensor 'blk.3.ffn_down.weight' (Q4_K): block 1207 has a non-finite scale
//    (dmin = NaN); the file is damaged"
// A file that passed is remembered in the digest cache under its state when it was mapped
// (common/digest_cache.hpp), so loading it again skips the pass.
#pragma once

#include <string>

#include "gguf/gguf_file.hpp"

namespace ember::models {

void check_block_scales(const gguf::File& file);

// The SHA-256 (hex) of a mapped model file, with the same check done in the same pass:
// each slab of blocks is checked right after it is hashed, while it is in cache, so a
// file's first load pays for one read of its bytes, not two. Both results go to the
// digest cache. ember::Error when a scale is non-finite, or when the file changed while
// it was read ("load it again").
std::string hash_and_check_block_scales(const gguf::File& file);

// The same pass without the digest cache (scripts/bench-load.sh sets it against hashing
// the mapping alone: what the check adds to a file's first load).
std::string hash_and_check_block_scales_uncached(const gguf::File& file);

}  // namespace ember::models
