// The AVX-512 VNNI products of weights whose dot product takes Q8_0 activations in
// eight-lane blocks: Q8_0, Q4_0 and Q5_0 (compiled with the AVX-512 flags plus -mavx512vnni;
// see variant_kernels.hpp for the rules of a variant translation unit).
//
// Numerics are exactly model-math §2.9 (and llama.cpp's Q4_0 / Q5_0 x Q8_0 products,
// which have the same shape): for each output, eight float lanes; per block, lane i gets s_i = the
// int32 sum of the products of elements 4i..4i+3 (exact) and
// acc_i = fma(d_w * d_a, (float)s_i, acc_i); then the eight-lane fold. Here a 512-bit
// register holds the eight lanes of two tokens for one weight row (the last tokens of a
// prompt that do not fill a chunk of sixteen) or of two weight rows for one token
// (decode). Whole chunks of sixteen prompt tokens go in the lanes of a register instead
// (avx512_vnni_q8_0_lanes.hpp), with the same bits.
//
// vpdpbusd multiplies unsigned by signed bytes, so the weights enter as w + 128 (Q8_0:
// w xor 0x80; Q4_0: q - 8 + 128; Q5_0: q - 16 + 128) and the excess 128 * (sum of the four activations)
// is subtracted by starting the accumulation from -128 * that sum. All of it is exact
// integer arithmetic: s_i is the same int32 as a plain loop would give.
#include "kernels/fast/intrinsics.hpp"

#include "kernels/fast/avx512_common.hpp"
#include "kernels/fast/avx512_vnni_q8_0_lanes.hpp"
#include "kernels/fast/prefetch.hpp"
#include "kernels/fast/variant_kernels.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace ember::kernels::fast::avx512_vnni {

namespace {

__m512 half_pair(std::uint16_t low, std::uint16_t high) {
    return _mm512_insertf32x8(_mm512_set1_ps(_cvtsh_ss(low)), _mm256_set1_ps(_cvtsh_ss(high)), 1);
}

// How a weight block enters vpdpbusd: its 32 values as unsigned bytes w + 128, in element
// order, either in both 256-bit halves (`biased`) or one block per half (`biased_pair`).
struct Q8_0Weights {
    using Block = BlockQ8_0;
    static constexpr bool kValuesInFile = true;  // the 32 values are signed bytes in the file
    static __m512i biased(const Block& b) {
        const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)));
        return _mm512_xor_si512(q, _mm512_set1_epi8(static_cast<char>(0x80)));
    }
    static __m512i biased_pair(const Block& low, const Block& high) {
        const __m512i q = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(low.qs))),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(high.qs)), 1);
        return _mm512_xor_si512(q, _mm512_set1_epi8(static_cast<char>(0x80)));
    }
};

// The 4-bit formats: elements 0-15 of a block are the low nibbles of its 16 bytes, 16-31
// the high ones. From the bytes in 128-bit lanes [a, a, b, b]: 32 nibbles of a, then b.
__m512i nibbles(__m512i bytes) {
    return _mm512_and_si512(_mm512_mask_blend_epi64(0xCC, bytes, _mm512_srli_epi16(bytes, 4)), _mm512_set1_epi8(0xF));
}
__m512i lanes_aabb(const std::uint8_t* a, const std::uint8_t* b) {
    const __m256i lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)));
    const __m256i hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// Q4_0: w = q - 8, so w + 128 = q + 120.
struct Q4_0Weights {
    using Block = BlockQ4_0;
    static constexpr bool kValuesInFile = false;
    static __m512i biased(const Block& b) {
        return _mm512_add_epi8(nibbles(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)))),
                               _mm512_set1_epi8(120));
    }
    static __m512i biased_pair(const Block& low, const Block& high) {
        return _mm512_add_epi8(nibbles(lanes_aabb(low.qs, high.qs)), _mm512_set1_epi8(120));
    }
};

// Q5_0: the fifth bit of element j is bit j of qh; w = q - 16, so w + 128 = q + 112.
struct Q5_0Weights {
    using Block = BlockQ5_0;
    static constexpr bool kValuesInFile = false;
    static std::uint64_t fifth_bits(const Block& b) {
        std::uint32_t qh;
        std::memcpy(&qh, b.qh, sizeof qh);
        return qh;
    }
    static __m512i with_fifth_bits(__m512i q4, std::uint64_t bits) {
        const __m512i fifth = _mm512_maskz_mov_epi8(bits, _mm512_set1_epi8(0x10));
        return _mm512_add_epi8(_mm512_or_si512(q4, fifth), _mm512_set1_epi8(112));
    }
    static __m512i biased(const Block& b) {
        const __m512i q4 = nibbles(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs))));
        return with_fifth_bits(q4, fifth_bits(b) | fifth_bits(b) << 32);
    }
    static __m512i biased_pair(const Block& low, const Block& high) {
        return with_fifth_bits(nibbles(lanes_aabb(low.qs, high.qs)), fifth_bits(low) | fifth_bits(high) << 32);
    }
};

// Tile of R rows x T tokens; tokens are taken in pairs, an odd last token is paired
// with itself and its duplicate result is not stored.
template <typename W>
struct PerTileOperands {
    template <int R, int T>
    static void run(const MatmulTask& task, std::size_t r0, std::size_t t0) {
        constexpr int P = (T + 1) / 2;
        const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
        const typename W::Block* w[R];
        const BlockQ8_0* a[2 * P];
        for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const typename W::Block*>(task.weights + (r0 + r) * task.weight_row_bytes);
        for (int t = 0; t < 2 * P; ++t) {
            const int token = t < T ? t : T - 1;
            a[t] = reinterpret_cast<const BlockQ8_0*>(task.acts + (t0 + token) * task.act_row_bytes);
        }
        __m512 acc[R][P];
        for (int r = 0; r < R; ++r)
            for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
        const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));

        for (std::size_t b = 0; b < n_blocks; ++b) {
            __m512i wu[R];
            __m512 wd[R];
            for (int r = 0; r < R; ++r) {
                wu[r] = W::biased(w[r][b]);
                wd[r] = _mm512_set1_ps(_cvtsh_ss(w[r][b].d));
            }
            for (int p = 0; p < P; ++p) {
                const BlockQ8_0& lo = a[2 * p][b];
                const BlockQ8_0& hi = a[2 * p + 1][b];
                const __m512i aq = _mm512_inserti64x4(
                    _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo.qs))),
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi.qs)), 1);
                const __m512i excess = _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, aq);
                const __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(), excess);
                const __m512 ad = half_pair(lo.d, hi.d);
                for (int r = 0; r < R; ++r) {
                    const __m512 s = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start, wu[r], aq));
                    acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(wd[r], ad), s, acc[r][p]);
                }
            }
        }
        for (int r = 0; r < R; ++r) {
            for (int p = 0; p < P; ++p) {
                float* out = task.out + r0 + r;
                out[(t0 + 2 * p) * task.out_stride] = avx512_fold8(_mm512_castps512_ps256(acc[r][p]));
                if (2 * p + 1 < T) out[(t0 + 2 * p + 1) * task.out_stride] = avx512_fold8(_mm512_extractf32x8_ps(acc[r][p], 1));
            }
        }
    }
};

// The matrix-vector product (one token), eight rows at a time. Here a 512-bit register
// holds the lanes of two rows (low half row 2q, high half row 2q + 1) for the one token,
// and the eight rows' scales are converted together: per block, the weight side costs
// one load pair, an xor, a vpdpbusd, a convert, a permute and an FMA per two rows.
template <typename W>
void gemv8(const MatmulTask& task, std::size_t r0) {
    const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
    const typename W::Block* w[8];
    for (int r = 0; r < 8; ++r) w[r] = reinterpret_cast<const typename W::Block*>(task.weights + (r0 + r) * task.weight_row_bytes);
    const auto* a = reinterpret_cast<const BlockQ8_0*>(task.acts);
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512i pair_index[4];
    for (int q = 0; q < 4; ++q) {
        pair_index[q] = _mm512_inserti64x4(_mm512_set1_epi32(2 * q), _mm256_set1_epi32(2 * q + 1), 1);
    }
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};

    const NextRowsPrefetch prefetch(task, r0 + 8, 8, n_blocks);
    for (std::size_t b = 0; b < n_blocks; ++b) {
        prefetch(b);
        const __m512i aq = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs)));
        const __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, aq));
        __m128i scales = _mm_setzero_si128();
        scales = _mm_insert_epi16(scales, w[0][b].d, 0);
        scales = _mm_insert_epi16(scales, w[1][b].d, 1);
        scales = _mm_insert_epi16(scales, w[2][b].d, 2);
        scales = _mm_insert_epi16(scales, w[3][b].d, 3);
        scales = _mm_insert_epi16(scales, w[4][b].d, 4);
        scales = _mm_insert_epi16(scales, w[5][b].d, 5);
        scales = _mm_insert_epi16(scales, w[6][b].d, 6);
        scales = _mm_insert_epi16(scales, w[7][b].d, 7);
        // d_w * d_a for the eight rows, in lanes 0..7
        const __m512 dd8 = _mm512_castps256_ps512(_mm256_mul_ps(_mm256_cvtph_ps(scales), _mm256_set1_ps(_cvtsh_ss(a[b].d))));
        for (int q = 0; q < 4; ++q) {
            const __m512i wu = W::biased_pair(w[2 * q][b], w[2 * q + 1][b]);
            const __m512 s = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start, wu, aq));
            acc[q] = _mm512_fmadd_ps(_mm512_permutexvar_ps(pair_index[q], dd8), s, acc[q]);
        }
    }
    for (int q = 0; q < 4; ++q) {
        task.out[r0 + 2 * q] = avx512_fold8(_mm512_castps512_ps256(acc[q]));
        task.out[r0 + 2 * q + 1] = avx512_fold8(_mm512_extractf32x8_ps(acc[q], 1));
    }
}


// ---- Prefill: activations packed once per chunk of tokens, shared by every row tile ----
//
// PerTileOperands above rebuilds each token pair's operands (the 512-bit activation register, the
// -128 * sum correction, the paired scales) in every tile, once per four weight rows. For
// prompts the pairs are instead packed once per chunk of up to kChunkPairs pairs and read
// straight from memory by every row tile of the call. The arithmetic per output is that of
// PerTileOperands (same int32 s_i, same d_w * d_a, same FMA per block, same fold): the same bits.

// One block of two tokens: token 2p's 32 values in bytes 0-31, token 2p + 1's in 32-63;
// the vpdpbusd starting value -128 * (sum of each lane's four values); the scales as F32,
// eight lanes each.
struct alignas(64) PairBlock {
    std::int8_t q[64];
    std::int32_t start[16];
    float d[16];
};

constexpr int kTileRows = 4;
constexpr std::size_t kChunkPairs = 4;
constexpr std::size_t kPackBytes = 192 * 1024;       // on the stack (oneTBB workers have 4 MiB)
constexpr std::size_t kPackBlocks = kPackBytes / sizeof(PairBlock);
constexpr std::size_t kScaleFloats = 16 * 1024;      // 64 KiB of weight scales, on the stack too

// Packs tokens [t0, t0 + tokens) as pairs into pack[p * n_blocks + b]; an odd last token
// is paired with itself.
void pack_pairs(const MatmulTask& task, std::size_t t0, std::size_t tokens, PairBlock* pack) {
    const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (std::size_t p = 0; 2 * p < tokens; ++p) {
        const auto* lo = reinterpret_cast<const BlockQ8_0*>(task.acts + (t0 + 2 * p) * task.act_row_bytes);
        const std::size_t second = 2 * p + 1 < tokens ? 2 * p + 1 : 2 * p;
        const auto* hi = reinterpret_cast<const BlockQ8_0*>(task.acts + (t0 + second) * task.act_row_bytes);
        for (std::size_t b = 0; b < n_blocks; ++b) {
            PairBlock& out = pack[p * n_blocks + b];
            const __m512i q = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo[b].qs))),
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi[b].qs)), 1);
            _mm512_store_si512(out.q, q);
            _mm512_store_si512(out.start, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, q)));
            _mm512_store_ps(out.d, half_pair(lo[b].d, hi[b].d));
        }
    }
}

// R weight rows x P packed pairs (the last pair's second token is stored only if it is
// real: `tokens` counts the chunk's tokens).
template <typename W, int R, int P>
void packed_tile(const MatmulTask& task, const PairBlock* pack, const float* scales, std::size_t r0, std::size_t t0,
                 std::size_t tokens) {
    const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
    const typename W::Block* w[R];
    for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const typename W::Block*>(task.weights + (r0 + r) * task.weight_row_bytes);
    __m512 acc[R][P];
    for (int r = 0; r < R; ++r)
        for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();

    for (std::size_t b = 0; b < n_blocks; ++b) {
        for (int r = 0; r < R; ++r) {
            const __m512i wu = W::biased(w[r][b]);
            const __m512 wd = _mm512_set1_ps(scales[r * n_blocks + b]);
            for (int p = 0; p < P; ++p) {
                const PairBlock& a = pack[p * n_blocks + b];
                const __m512i s = _mm512_dpbusd_epi32(_mm512_load_si512(a.start), wu, _mm512_load_si512(a.q));
                acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(wd, _mm512_load_ps(a.d)), _mm512_cvtepi32_ps(s), acc[r][p]);
            }
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int p = 0; p < P; ++p) {
            float* out = task.out + r0 + r;
            out[(t0 + 2 * p) * task.out_stride] = avx512_fold8(_mm512_castps512_ps256(acc[r][p]));
            if (static_cast<std::size_t>(2 * p + 1) < tokens) out[(t0 + 2 * p + 1) * task.out_stride] = avx512_fold8(_mm512_extractf32x8_ps(acc[r][p], 1));
        }
    }
}

// The weight rows of one call, a slab at a time: their scales converted to F32 once
// (scales[(r - first) * n_blocks + b]) and read by every chunk of tokens.
struct RowSlab {
    std::size_t first, end;
    const float* scales;
};

template <typename W, int P>
void packed_rows(const MatmulTask& task, const PairBlock* pack, const RowSlab& slab, std::size_t t0, std::size_t tokens) {
    const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
    std::size_t r = slab.first;
    for (; r + kTileRows <= slab.end; r += kTileRows) {
        packed_tile<W, kTileRows, P>(task, pack, slab.scales + (r - slab.first) * n_blocks, r, t0, tokens);
    }
    for (; r < slab.end; ++r) packed_tile<W, 1, P>(task, pack, slab.scales + (r - slab.first) * n_blocks, r, t0, tokens);
}

template <typename W, int P>
void packed_rows_up_to(std::size_t pairs, const MatmulTask& task, const PairBlock* pack, const RowSlab& slab,
                       std::size_t t0, std::size_t tokens) {
    if constexpr (P > 1) {
        if (pairs < static_cast<std::size_t>(P)) return packed_rows_up_to<W, P - 1>(pairs, task, pack, slab, t0, tokens);
    }
    packed_rows<W, P>(task, pack, slab, t0, tokens);
}

// Rows [row_begin, row_end) for every token, a chunk of tokens at a time; false when a
// chunk of one pair would not fit the pack (rows over 32768 columns).
template <typename W>
bool packed_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
    const std::size_t fit = kPackBlocks / n_blocks;
    if (fit == 0) return false;
    const std::size_t chunk_tokens = 2 * std::min(kChunkPairs, fit);
    const std::size_t slab_rows = std::max<std::size_t>(1, kScaleFloats / n_blocks / kTileRows * kTileRows);
    PairBlock pack[kPackBlocks];
    float scales[kScaleFloats];
    for (std::size_t first = row_begin; first < row_end; first += slab_rows) {
        const RowSlab slab{first, std::min(row_end, first + slab_rows), scales};
        for (std::size_t r = slab.first; r < slab.end; ++r) {
            const auto* w = reinterpret_cast<const typename W::Block*>(task.weights + r * task.weight_row_bytes);
            for (std::size_t b = 0; b < n_blocks; ++b) scales[(r - slab.first) * n_blocks + b] = _cvtsh_ss(w[b].d);
        }
        for (std::size_t t0 = 0; t0 < task.n_tokens; t0 += chunk_tokens) {
            const std::size_t tokens = std::min(chunk_tokens, task.n_tokens - t0);
            pack_pairs(task, t0, tokens, pack);
            packed_rows_up_to<W, static_cast<int>(kChunkPairs)>((tokens + 1) / 2, task, pack, slab, t0, tokens);
        }
    }
    return true;
}

template <typename W>
void matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    if (task.n_tokens == 1) {
        std::size_t r = row_begin;
        for (; r + 8 <= row_end; r += 8) gemv8<W>(task, r);
        for (; r < row_end; ++r) PerTileOperands<W>::template run<1, 1>(task, r, 0);
        return;
    }
    if (!packed_matmul_rows<W>(task, row_begin, row_end)) walk_rows<PerTileOperands<W>, 4, 6>(task, row_begin, row_end);
}

// Prompts: whole chunks of sixteen tokens in token lanes (avx512_vnni_q8_0_lanes.hpp), the
// rest in packed pairs. Both give every output the same bits.
template <typename W>
void rows_in_lanes_then_pairs(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    const std::size_t done = task.n_tokens > 1 ? token_lane_rows<W>(task, row_begin, row_end) : 0;
    if (done == task.n_tokens) return;
    MatmulTask rest = task;
    rest.token_lanes = nullptr;  // the per-product packs start at token 0, rest does not
    rest.token_pairs = nullptr;
    rest.token_pair_scales = nullptr;
    rest.acts += done * task.act_row_bytes;
    rest.n_tokens -= done;
    rest.out += done * task.out_stride;
    matmul_rows<W>(rest, row_begin, row_end);
}

}  // namespace

void pack_token_lanes(const std::byte* acts, std::size_t row_bytes, std::size_t n, TokenLanes* out) {
    pack_sixteen_tokens(acts, row_bytes, n, out);
}
void q8_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    rows_in_lanes_then_pairs<Q8_0Weights>(task, row_begin, row_end);
}
void q4_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    rows_in_lanes_then_pairs<Q4_0Weights>(task, row_begin, row_end);
}
void q5_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    rows_in_lanes_then_pairs<Q5_0Weights>(task, row_begin, row_end);
}

}  // namespace ember::kernels::fast::avx512_vnni
