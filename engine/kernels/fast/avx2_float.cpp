// The AVX2 variant's F32 / F16 / BF16 products (compiled with -mavx2 -mfma -mf16c; see
// variant_kernels.hpp for the rules of a variant translation unit), in llama.cpp's two
// summation orders (kernel_types.hpp SumOrder; the tiles are float_tiles.hpp's), the same
// bits as the AVX-512 variant: its 16-lane accumulators are pairs of 8-lane registers
// here (lanes 0-7, 8-15), and vdpbf16ps is emulated exactly (float_sums.hpp).
#include "kernels/fast/intrinsics.hpp"

#include "kernels/fast/avx2_common.hpp"
#include "kernels/fast/float_sums.hpp"
#include "kernels/fast/float_tiles.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avx2 {

namespace {

// Sixteen float lanes.
struct Lanes16 {
    __m256 lo, hi;
};


Lanes16 zero_lanes() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
Lanes16 add(Lanes16 a, Lanes16 b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
Lanes16 fmadd(Lanes16 w, Lanes16 a, Lanes16 acc) { return {_mm256_fmadd_ps(w.lo, a.lo, acc.lo), _mm256_fmadd_ps(w.hi, a.hi, acc.hi)}; }
// reduce16: lane j + 8 onto j, then the eight-lane fold
float fold16(Lanes16 v) { return avx2_fold8(_mm256_add_ps(v.hi, v.lo)); }
float combine_four(const Lanes16* acc) { return fold16(add(add(acc[0], acc[2]), add(acc[1], acc[3]))); }

struct Avx2Lanes {
    using Accumulator = Lanes16;
    static Lanes16 zero() { return zero_lanes(); }
    static float fold(Lanes16 acc) { return fold16(acc); }
};

// The first `count` elements of p, zero-padded to N.
template <typename Element, int N>
struct Padded {
    alignas(32) Element values[N] = {};
    Padded(const Element* p, std::size_t count) {
        for (std::size_t i = 0; i < count; ++i) values[i] = p[i];
    }
};

struct F32Policy : Avx2Lanes {
    using Element = float;
    using Vector = Lanes16;
    static constexpr std::size_t kChunk = 16;
    static Lanes16 load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
    static Lanes16 load_partial(const float* p, std::size_t count) { return load(Padded<float, 16>(p, count).values); }
    static Lanes16 accumulate(Lanes16 acc, Lanes16 w, Lanes16 a) { return fmadd(w, a, acc); }
    static float finish_vec_dot(const Lanes16* acc, const float* w, const float* a, std::size_t tail) {
        return f32_dot_tail(combine_four(acc), w, a, tail);
    }
};

float half_value(std::uint16_t h) { return _cvtsh_ss(h); }

struct F16Policy : Avx2Lanes {
    using Element = std::uint16_t;
    using Vector = Lanes16;
    static constexpr std::size_t kChunk = 16;
    static Lanes16 load(const Element* p) {
        return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
                _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)))};
    }
    static Lanes16 load_partial(const Element* p, std::size_t count) { return load(Padded<Element, 16>(p, count).values); }
    static Lanes16 accumulate(Lanes16 acc, Lanes16 w, Lanes16 a) { return fmadd(w, a, acc); }
    static float finish_vec_dot(const Lanes16* acc, const Element* w, const Element* a, std::size_t tail) {
        return static_cast<float>(half_dot_tail(static_cast<double>(combine_four(acc)), w, a, tail, half_value));
    }
};

// Sixteen BF16 pairs: elements 0-15 in `lo` (lanes 0-7), 16-31 in `hi` (lanes 8-15).
struct Pairs16 {
    __m256i lo, hi;
};

// vdpbf16ps on eight lanes: += odd pair products, then += even ones (float_sums.hpp),
// plain FMAs in MXCSR's FTZ | DAZ mode (BF16Policy::FmaMode, float_tiles.hpp).
__m256 dpbf16(__m256 acc, __m256i w, __m256i a) {
    const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
    acc = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(w, high)), _mm256_castsi256_ps(_mm256_and_si256(a, high)), acc);
    return _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(w, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(a, 16)), acc);
}

// FlushSubnormalsMode for the two halves of a 16-lane accumulator.
struct FlushSubnormalsMode16 : FlushSubnormalsMode {
    static void pin(Lanes16& acc) {
        FlushSubnormalsMode::pin(acc.lo);
        FlushSubnormalsMode::pin(acc.hi);
    }
};

struct BF16Policy : Avx2Lanes {
    using Element = std::uint16_t;
    using Vector = Pairs16;
    using FmaMode = FlushSubnormalsMode16;
    static constexpr std::size_t kChunk = 32;
    static Pairs16 load(const Element* p) {
        return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16))};
    }
    static Pairs16 load_partial(const Element* p, std::size_t count) { return load(Padded<Element, 32>(p, count).values); }
    static Lanes16 accumulate(Lanes16 acc, Pairs16 w, Pairs16 a) { return {dpbf16(acc.lo, w.lo, a.lo), dpbf16(acc.hi, w.hi, a.hi)}; }
    static float finish_vec_dot(const Lanes16* acc, const Element* w, const Element* a, std::size_t tail) {
        double sum = 0.0 + static_cast<double>(fold16(acc[0]));
        sum += static_cast<double>(fold16(acc[1]));
        return static_cast<float>(half_dot_tail(sum, w, a, tail, bf16_value));
    }
};

// BF16 in the tiled order: TiledTile<BF16Policy>'s operations (dpbf16 on each half), each
// 32-element chunk taken as its two halves in turn (elements 0-15 into every output's
// lanes 0-7, then 16-31 into lanes 8-15). Per half a tile holds its rows' split weights,
// one token's split activations and the accumulators: 15 registers for 2 x 2, where
// TiledTile's whole-chunk step kept both halves' splits and stored the accumulators every
// chunk (a fifth of a BF16 prompt on Zen 3). Every loop over the tile is unrolled: rolled,
// GCC keeps the accumulator arrays in memory.
struct TiledBf16Tile {
    using P = BF16Policy;

    // acc += the products of one half chunk (16 elements) of R rows and T tokens: the odd
    // elements' products, then the even ones' (dpbf16)
    template <int R, int T>
    [[gnu::always_inline]] static inline void half(const __m256i (&w)[R], const __m256i (&a)[T], __m256 (&acc)[R][T]) {
        const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
        __m256 w_odd[R], w_even[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            w_odd[r] = _mm256_castsi256_ps(_mm256_and_si256(w[r], high));
            w_even[r] = _mm256_castsi256_ps(_mm256_slli_epi32(w[r], 16));
        }
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
            const __m256 a_odd = _mm256_castsi256_ps(_mm256_and_si256(a[t], high));
            const __m256 a_even = _mm256_castsi256_ps(_mm256_slli_epi32(a[t], 16));
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(w_even[r], a_even, _mm256_fmadd_ps(w_odd[r], a_odd, acc[r][t]));
        }
    }

    // FlushSubnormalsMode::pin on every accumulator
    template <int R, int T>
    [[gnu::always_inline]] static inline void pin_all(__m256 (&lo)[R][T], __m256 (&hi)[R][T]) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                FlushSubnormalsMode::pin(lo[r][t]);
                FlushSubnormalsMode::pin(hi[r][t]);
            }
    }

    template <int R, int T>
    static void run(const MatmulTask& task, std::size_t r0, std::size_t t0) {
        const TileRows<std::uint16_t, R, T> rows(task, r0, t0);
        __m256 lo[R][T], hi[R][T];  // every output's lanes 0-7 and 8-15
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) lo[r][t] = hi[r][t] = _mm256_setzero_ps();
        const std::size_t n = task.cols;
        const NextRowsPrefetch prefetch(task, r0 + R, T == 1 ? R : 0, n / P::kChunk, n * sizeof(typename P::Element));
        using Mode = FlushSubnormalsMode;
        {
            [[maybe_unused]] const Mode mode;
            pin_all(lo, hi);
            std::size_t k = 0;
            for (; k + P::kChunk <= n; k += P::kChunk) {
                prefetch(k / P::kChunk);
                __m256i w[R], a[T];
    #pragma GCC unroll 8
                for (int r = 0; r < R; ++r) w[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows.w[r] + k));
    #pragma GCC unroll 8
                for (int t = 0; t < T; ++t) a[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows.a[t] + k));
                half<R, T>(w, a, lo);
    #pragma GCC unroll 8
                for (int r = 0; r < R; ++r) w[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows.w[r] + k + 16));
    #pragma GCC unroll 8
                for (int t = 0; t < T; ++t) a[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows.a[t] + k + 16));
                half<R, T>(w, a, hi);
            }
            if (k < n) {
                __m256i w_lo[R], w_hi[R], a_lo[T], a_hi[T];
    #pragma GCC unroll 8
                for (int r = 0; r < R; ++r) {
                    const Pairs16 v = P::load_partial(rows.w[r] + k, n - k);
                    w_lo[r] = v.lo, w_hi[r] = v.hi;
                }
    #pragma GCC unroll 8
                for (int t = 0; t < T; ++t) {
                    const Pairs16 v = P::load_partial(rows.a[t] + k, n - k);
                    a_lo[t] = v.lo, a_hi[t] = v.hi;
                }
                half<R, T>(w_lo, a_lo, lo);
                half<R, T>(w_hi, a_hi, hi);
            }
            pin_all(lo, hi);
        }
        pin_all(lo, hi);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) task.out[(t0 + t) * task.out_stride + r0 + r] = fold16({lo[r][t], hi[r][t]});
    }
};

// The tile of a policy's tiled order.
template <typename P>
struct TiledFor {
    using type = TiledTile<P>;
};
template <>
struct TiledFor<BF16Policy> {
    using type = TiledBf16Tile;
};

// Prompts in the tiled order: the rows in slabs of about kSlabBytes of weights, each
// multiplied with chunks of kChunkTokens tokens, so that a slab and a chunk's activations
// (16 tokens of 8192 F16 columns: 256 KiB) stay in L2 together instead of every row pair
// streaming all the tokens from L3. Each output's operations do not depend on the walk.
constexpr std::size_t kSlabBytes = 512 * 1024;
constexpr std::size_t kChunkTokens = 16;

template <typename P>
void tiled_prompt_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    const std::size_t fit = kSlabBytes / (task.weight_row_bytes ? task.weight_row_bytes : 1);
    const std::size_t slab_rows = fit < 2 ? 2 : fit / 2 * 2;
    for (std::size_t first = row_begin; first < row_end; first += slab_rows) {
        const std::size_t end = row_end - first < slab_rows ? row_end : first + slab_rows;
        for (std::size_t t0 = 0; t0 < task.n_tokens; t0 += kChunkTokens) {
            MatmulTask chunk = task;
            chunk.acts += t0 * task.act_row_bytes;
            chunk.out += t0 * task.out_stride;
            chunk.n_tokens = task.n_tokens - t0 < kChunkTokens ? task.n_tokens - t0 : kChunkTokens;
            walk_rows<typename TiledFor<P>::type, 2, 2>(chunk, first, end);
        }
    }
}

// A vec_dot output's four 16-lane accumulators take half the registers: one at a time.
template <typename P>
void float_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    if (task.order == SumOrder::tiled) {
        if (task.n_tokens == 1) walk_rows<typename TiledFor<P>::type, 2, 1>(task, row_begin, row_end);
        else tiled_prompt_rows<P>(task, row_begin, row_end);
    } else {
        walk_rows<VecDotTile<P>, 1, 1>(task, row_begin, row_end);
    }
}

}  // namespace

void f16_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    float_matmul_rows<F16Policy>(task, row_begin, row_end);
}
void bf16_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    float_matmul_rows<BF16Policy>(task, row_begin, row_end);
}
void f32_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    float_matmul_rows<F32Policy>(task, row_begin, row_end);
}

}  // namespace ember::kernels::fast::avx2
