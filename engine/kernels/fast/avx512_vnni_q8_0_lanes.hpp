// Internal to avx512_vnni_q8_0.cpp (compiled with its AVX-512 VNNI flags, internal linkage
// only, see variant_kernels.hpp): the prompt products of the weights that take Q8_0
// activations (Q8_0, Q4_0, Q5_0) with sixteen tokens in the lanes of each register.
//
// The float work per output is llama.cpp's (model-math §2.9): per block, eight int32 lane
// sums s_i (elements 4i..4i+3), acc_i = fma(d_w * d_a, (float)s_i, acc_i), then the fold
// ((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7)). Here register i of a weight row holds lane i of
// sixteen tokens' outputs, so one vpdpbusd forms s_i for all sixteen from one broadcast of
// the row's four weights, and the fold is done across registers, with the same adds in
// the same order.
//
// vpdpbusd multiplies unsigned by signed bytes: the activations enter as a + 128 (packed
// into TokenLanes once per product by convert_activations, or here when a caller brings
// none), the weights as signed bytes (Q8_0's as in the file, the others unpacked once per
// slab), and the excess 128 * (sum of the four weights) is removed by starting each sum
// at -128 * that sum, computed once per weight row and block in each slab of rows. s_i
// is the exact int32 of a plain loop.
//
// Per output and block this costs a vpdpbusd, a convert and an FMA, plus one multiply per
// row and block for sixteen tokens: three instructions where the two-token layout of
// PerTileOperands / packed_tile needs four and a quarter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/fast/intrinsics.hpp"
#include "kernels/fast/kernel_types.hpp"

namespace ember::kernels::fast::avx512_vnni {
namespace {

constexpr std::size_t kLanePackBlocks = 192 * 1024 / sizeof(TokenLanes);  // on the stack: rows up to 10912 columns
constexpr std::size_t kSlabRows = 128;  // rows per slab at most: 64 KiB of running sums

// Weight rows x blocks per slab: 256 KiB of starting values and 32 KiB of scales; formats
// whose values are unpacked (Q4_0, Q5_0) take half as many, with 128 KiB of values.
template <typename W>
constexpr std::size_t slab_row_blocks() {
    return W::kValuesInFile ? 8192 : 4096;
}

// Packs sixteen tokens (from `first`, `row_bytes` apart) into pack[b], block by block:
// the sixteen tokens' 32 values are a 16 x 8 matrix of dwords, transposed as two 8 x 8
// ones (tokens 0-7 in the low halves of the registers, 8-15 in the high halves).
void pack_sixteen_tokens(const std::byte* first, std::size_t row_bytes, std::size_t cols, TokenLanes* pack) {
    const std::size_t n_blocks = cols / kQ8_0BlockSize;
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    const __m512i low_quarters = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    const __m512i high_quarters = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    const __m512i token_offsets = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                                     _mm512_set1_epi32(static_cast<int>(row_bytes)));
    for (std::size_t b = 0; b < n_blocks; ++b) {
        const std::byte* block = first + b * sizeof(BlockQ8_0);
        __m512i z[8];  // z[k]: token k's dwords 0-7, then token k + 8's
        for (int k = 0; k < 8; ++k) {
            const auto* low = reinterpret_cast<const BlockQ8_0*>(block + k * row_bytes);
            const auto* high = reinterpret_cast<const BlockQ8_0*>(block + (k + 8) * row_bytes);
            z[k] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(low->qs))),
                                                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(high->qs)), 1),
                                    flip);
        }
        // Within each 128-bit quarter: t[2m] = tokens 2m, 2m+1 interleaved, dwords 0,1 (4,5);
        // t[2m+1] the same for dwords 2,3 (6,7).
        __m512i t[8];
        for (int m = 0; m < 4; ++m) {
            t[2 * m] = _mm512_unpacklo_epi32(z[2 * m], z[2 * m + 1]);
            t[2 * m + 1] = _mm512_unpackhi_epi32(z[2 * m], z[2 * m + 1]);
        }
        // u[i] (i < 4): tokens 0-3 of each half, dword i (first quarter) and i + 4 (second);
        // u[i + 4]: tokens 4-7 of each half.
        __m512i u[8];
        for (int g = 0; g < 2; ++g) {
            const __m512i* s = t + 4 * g;
            u[4 * g + 0] = _mm512_unpacklo_epi64(s[0], s[2]);
            u[4 * g + 1] = _mm512_unpackhi_epi64(s[0], s[2]);
            u[4 * g + 2] = _mm512_unpacklo_epi64(s[1], s[3]);
            u[4 * g + 3] = _mm512_unpackhi_epi64(s[1], s[3]);
        }
        TokenLanes& out = pack[b];
        for (int i = 0; i < 4; ++i) {
            _mm512_store_si512(out.q[i], _mm512_permutex2var_epi64(u[i], low_quarters, u[i + 4]));
            _mm512_store_si512(out.q[i + 4], _mm512_permutex2var_epi64(u[i], high_quarters, u[i + 4]));
        }
        // Each token's scale is the block's first two bytes (the gather reads four, the
        // other two are the block's first values).
        const __m512i d = _mm512_i32gather_epi32(token_offsets, block, 1);
        _mm512_store_ps(out.d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d)));
    }
}

// Per weight row and block, formed by a row's first tile in a slab and read by every
// later one: the eight starting values -128 * (w[4i] + .. + w[4i+3]), the scale as F32,
// and for formats that pack their values (W::kValuesInFile false) the 32 values as
// signed bytes (W::biased gives them + 128).
template <typename W>
void form_row_block(const typename W::Block& w, std::int32_t* starts, float* scale, std::int8_t* values) {
    const __m256i excess = _mm256_set1_epi8(static_cast<char>(0x80));
    __m256i q;
    if constexpr (W::kValuesInFile) {
        q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs));
    } else {
        q = _mm256_xor_si256(_mm512_castsi512_si256(W::biased(w)), excess);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(values), q);
    }
    const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), excess, q);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(starts), _mm256_sub_epi32(_mm256_setzero_si256(), sums));
    *scale = _cvtsh_ss(w.d);
}

inline std::int32_t four_weights(const std::int8_t* q) {
    std::int32_t v;
    std::memcpy(&v, q, sizeof v);
    return v;
}

// Blocks of a row summed before the next row pair is started: the pack of one segment
// (18 KiB) stays in L1 while every row pair of the slab reads it.
constexpr std::size_t kSegmentBlocks = 32;

// A slab's per row and block entries (form_row_block), from row `first`'s.
struct SlabEntries {
    std::int32_t* starts;  // [row][block][8]
    float* scales;         // [row][block]
    std::int8_t* values;   // [row][block][32], formats that pack their values only
    SlabEntries from_row(std::size_t k, std::size_t n_blocks) const {
        return {starts + k * n_blocks * 8, scales + k * n_blocks, values ? values + k * n_blocks * 32 : nullptr};
    }
};

// R weight rows (from r0) x the sixteen tokens of `pack`, blocks [b0, b1), continuing the
// lane sums in `saved` (b0 > 0; saved[r][i] is lane i of row r0 + r's sixteen outputs)
// and writing the outputs when b1 is the row's end. `slab` points at row r0's entries;
// the first chunk of tokens forms them (kFormEntries).
template <typename W, int R, bool kFormEntries>
void lane_tile(const MatmulTask& task, const TokenLanes* pack, const SlabEntries& slab, std::size_t r0, std::size_t t0,
               std::size_t b0, std::size_t b1, __m512 (*saved)[8]) {
    const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
    using Block = typename W::Block;
    const Block* w[R];
    for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(task.weights + (r0 + r) * task.weight_row_bytes);
    if constexpr (kFormEntries) {
        for (int r = 0; r < R; ++r) {
            for (std::size_t b = b0; b < b1; ++b) {
                const std::size_t e = r * n_blocks + b;
                form_row_block<W>(w[r][b], slab.starts + e * 8, slab.scales + e, W::kValuesInFile ? nullptr : slab.values + e * 32);
            }
        }
    }
    __m512 acc[R][8];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) acc[r][i] = b0 == 0 ? _mm512_setzero_ps() : saved[r][i];
    }
    // The first chunk reads each weight from memory: meanwhile the next tile's rows
    // (the same blocks) are prefetched, a line per row and block.
    const std::uintptr_t next_rows = reinterpret_cast<std::uintptr_t>(task.weights) + (r0 + R) * task.weight_row_bytes +
                                     b0 * sizeof(Block);
    for (std::size_t b = b0; b < b1; ++b) {
        if constexpr (kFormEntries) {
            for (int r = 0; r < R; ++r) {
                _mm_prefetch(reinterpret_cast<const char*>(next_rows + r * task.weight_row_bytes + (b - b0) * 64), _MM_HINT_T0);
            }
        }
        const TokenLanes& a = pack[b];
        __m512i values[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) values[i] = _mm512_load_si512(a.q[i]);
        const __m512 token_scales = _mm512_load_ps(a.d);
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) {
            const std::size_t e = r * n_blocks + b;
            const __m512 d = _mm512_mul_ps(token_scales, _mm512_set1_ps(slab.scales[e]));
            const std::int32_t* start = slab.starts + e * 8;
            const std::int8_t* q = nullptr;
            if constexpr (W::kValuesInFile) q = w[r][b].qs;
            else q = slab.values + e * 32;
#pragma GCC unroll 8
            for (int i = 0; i < 8; ++i) {
                const __m512i s = _mm512_dpbusd_epi32(_mm512_set1_epi32(start[i]), values[i], _mm512_set1_epi32(four_weights(q + 4 * i)));
                acc[r][i] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(s), acc[r][i]);
            }
        }
    }
    if (b1 < n_blocks) {
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
            for (int i = 0; i < 8; ++i) saved[r][i] = acc[r][i];
        }
        return;
    }
    for (int r = 0; r < R; ++r) {
        const __m512 lanes04 = _mm512_add_ps(acc[r][0], acc[r][4]);
        const __m512 lanes15 = _mm512_add_ps(acc[r][1], acc[r][5]);
        const __m512 lanes26 = _mm512_add_ps(acc[r][2], acc[r][6]);
        const __m512 lanes37 = _mm512_add_ps(acc[r][3], acc[r][7]);
        alignas(64) float sums[kLaneTokens];
        _mm512_store_ps(sums, _mm512_add_ps(_mm512_add_ps(lanes04, lanes26), _mm512_add_ps(lanes15, lanes37)));
        for (std::size_t j = 0; j < kLaneTokens; ++j) task.out[(t0 + j) * task.out_stride + r0 + r] = sums[j];
    }
}

// Rows [row_begin, row_end) for the tokens of whole chunks of sixteen; returns how many
// tokens that was (0 under sixteen tokens, or when the task brings no packed tokens and
// its rows are too long for a pack on the stack).
template <typename W>
std::size_t token_lane_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    constexpr std::size_t kRowBlocks = slab_row_blocks<W>();
    const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
    const std::size_t tokens = task.n_tokens / kLaneTokens * kLaneTokens;
    if (tokens == 0 || n_blocks > kRowBlocks / 2 || (!task.token_lanes && n_blocks > kLanePackBlocks)) return 0;
    const std::size_t row_limit = kRowBlocks / n_blocks < kSlabRows ? kRowBlocks / n_blocks : kSlabRows;
    const std::size_t slab_rows = row_limit / 2 * 2;  // at least 2
    TokenLanes own_pack[kLanePackBlocks];
    std::int32_t starts[kRowBlocks * 8];
    float scales[kRowBlocks];
    alignas(64) std::int8_t values[W::kValuesInFile ? 1 : kRowBlocks * 32];
    const SlabEntries entries{starts, scales, W::kValuesInFile ? nullptr : values};
    __m512 saved[kSlabRows][8];
    for (std::size_t first = row_begin; first < row_end; first += slab_rows) {
        const std::size_t end = first + slab_rows < row_end ? first + slab_rows : row_end;
        for (std::size_t t0 = 0; t0 < tokens; t0 += kLaneTokens) {
            const TokenLanes* pack = own_pack;
            if (task.token_lanes) pack = task.token_lanes + t0 / kLaneTokens * n_blocks;
            else pack_sixteen_tokens(task.acts + t0 * task.act_row_bytes, task.act_row_bytes, task.cols, own_pack);
            for (std::size_t b0 = 0; b0 < n_blocks; b0 += kSegmentBlocks) {
                const std::size_t b1 = b0 + kSegmentBlocks < n_blocks ? b0 + kSegmentBlocks : n_blocks;
                for (std::size_t r = first; r < end; r += 2) {
                    const std::size_t k = r - first;
                    const SlabEntries row = entries.from_row(k, n_blocks);
                    if (r + 2 > end) {
                        if (t0 == 0) lane_tile<W, 1, true>(task, pack, row, r, t0, b0, b1, saved + k);
                        else lane_tile<W, 1, false>(task, pack, row, r, t0, b0, b1, saved + k);
                    } else if (t0 == 0) {
                        lane_tile<W, 2, true>(task, pack, row, r, t0, b0, b1, saved + k);
                    } else {
                        lane_tile<W, 2, false>(task, pack, row, r, t0, b0, b1, saved + k);
                    }
                }
            }
        }
    }
    return tokens;
}

}  // namespace
}  // namespace ember::kernels::fast::avx512_vnni
