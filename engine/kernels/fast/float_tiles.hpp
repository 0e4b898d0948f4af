// Internal: the F32 / F16 / BF16 matrix products in llama.cpp's two summation orders
// (kernel_types.hpp SumOrder), written once for the SIMD variants: a policy P supplies
// the instructions. Internal linkage only (see variant_kernels.hpp); each variant
// translation unit instantiates these with its own policies and flags.
//
// A policy P describes one weight type on one instruction set:
//   Element, Vector, Accumulator   stored element; what one load of kChunk elements
//                                  gives; a 16-lane float accumulator
//   kChunk                         elements per vector: 16 (F32, F16) or 32 (BF16 pairs)
//   load(p), load_partial(p, count)   (zero-padded)
//   zero(), accumulate(acc, w, a)  acc += w * a for one vector (FMA, or vdpbf16ps)
//   fold(acc)                      GCC's _mm512_reduce_add_ps tree (float_sums.hpp reduce16)
//   finish_vec_dot(acc, w, a, tail)   ggml_vec_dot's combination of the 64 / kChunk block
//                                  accumulators and its element-by-element tail
//   FmaMode (optional)             a type whose object, alive around the accumulate()
//                                  loop only, sets the floating-point mode those FMAs need
//                                  (vdpbf16ps emulation: MXCSR FTZ | DAZ); the folds and
//                                  tails run in the caller's mode. FmaMode::pin(acc) keeps
//                                  the compiler from moving an FMA across the mode switch
//                                  (pin_each).
// Tiles of R rows x T tokens reuse every loaded weight vector T times and every
// activation vector R times without changing any output's sequence of operations.
#pragma once

#include "kernels/fast/intrinsics.hpp"

#include <cstddef>

#include "kernels/fast/kernel_types.hpp"
#include "kernels/fast/prefetch.hpp"

namespace ember::kernels::fast {
namespace {

// The mode a policy's FMAs run in: P::FmaMode if it has one, else nothing to switch.
struct CallerFmaMode {
    template <typename A>
    static void pin(A&) {}
};
template <typename P>
struct FmaModeOf {
    using type = CallerFmaMode;
};
template <typename P>
    requires requires { typename P::FmaMode; }
struct FmaModeOf<P> {
    using type = typename P::FmaMode;
};

// vdpbf16ps's FMAs on ordinary FMAs: MXCSR with DAZ (bit 6: subnormal inputs read as
// zero) and FTZ (bit 15: tiny results become zero, x86's tininess after rounding), round
// to nearest even (bits 13-14 clear), for the object's lifetime; the caller's MXCSR
// afterwards. GCC does not order floating-point arithmetic against ldmxcsr, so every
// value crossing a switch goes through pin (an empty asm the FMAs depend on).
struct FlushSubnormalsMode {
    unsigned saved = _mm_getcsr();
    FlushSubnormalsMode() { _mm_setcsr((saved | 0x8040u) & ~0x6000u); }
    ~FlushSubnormalsMode() { _mm_setcsr(saved); }
    FlushSubnormalsMode(const FlushSubnormalsMode&) = delete;
    FlushSubnormalsMode& operator=(const FlushSubnormalsMode&) = delete;
    template <typename V>
    static void pin(V& v) {
        V copy = v;  // the asm on a copy leaves arrays of accumulators in registers
        asm volatile("" : "+v"(copy));
        v = copy;
    }
};

// Mode::pin on every accumulator of an array (of arrays). Used as
//     { const Mode mode; pin_each<Mode>(acc); FMAs...; pin_each<Mode>(acc); }
//     pin_each<Mode>(acc); folds...
// so each FMA depends on a pin after the switch into the mode, and a pin before the switch
// back depends on it, and each fold depends on a pin after that switch.
template <typename Mode, typename A>
void pin_each(A& acc) {
    Mode::pin(acc);
}
template <typename Mode, typename A, std::size_t N>
void pin_each(A (&acc)[N]) {
    for (std::size_t i = 0; i < N; ++i) pin_each<Mode>(acc[i]);
}

// The R weight rows and T activation rows of the tile at (r0, t0).
template <typename Element, int R, int T>
struct TileRows {
    const Element* w[R];
    const Element* a[T];
    TileRows(const MatmulTask& task, std::size_t r0, std::size_t t0) {
        for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Element*>(task.weights + (r0 + r) * task.weight_row_bytes);
        for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const Element*>(task.acts + (t0 + t) * task.act_row_bytes);
    }
};

// tinyBLAS: one accumulator per output, over chunks (a last partial chunk is zero-padded).
template <typename P>
struct TiledTile {
    template <int R, int T>
    static void run(const MatmulTask& task, std::size_t r0, std::size_t t0) {
        const TileRows<typename P::Element, R, T> rows(task, r0, t0);
        typename P::Accumulator acc[R][T];
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t) acc[r][t] = P::zero();

        const std::size_t n = task.cols;
        const NextRowsPrefetch prefetch(task, r0 + R, T == 1 ? R : 0, n / P::kChunk, n * sizeof(typename P::Element));
        using Mode = typename FmaModeOf<P>::type;
        {
            [[maybe_unused]] const Mode mode;
            pin_each<Mode>(acc);
            std::size_t k = 0;
            for (; k + P::kChunk <= n; k += P::kChunk) {
                prefetch(k / P::kChunk);
                typename P::Vector wv[R];
                for (int r = 0; r < R; ++r) wv[r] = P::load(rows.w[r] + k);
                for (int t = 0; t < T; ++t) {
                    const typename P::Vector av = P::load(rows.a[t] + k);
                    for (int r = 0; r < R; ++r) acc[r][t] = P::accumulate(acc[r][t], wv[r], av);
                }
            }
            if (k < n) {
                typename P::Vector wv[R];
                for (int r = 0; r < R; ++r) wv[r] = P::load_partial(rows.w[r] + k, n - k);
                for (int t = 0; t < T; ++t) {
                    const typename P::Vector av = P::load_partial(rows.a[t] + k, n - k);
                    for (int r = 0; r < R; ++r) acc[r][t] = P::accumulate(acc[r][t], wv[r], av);
                }
            }
            pin_each<Mode>(acc);
        }
        pin_each<Mode>(acc);
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t) task.out[(t0 + t) * task.out_stride + r0 + r] = P::fold(acc[r][t]);
    }
};

// ggml_vec_dot: 64-element blocks, chunk q of each block into accumulator q.
template <typename P>
struct VecDotTile {
    static constexpr int kAccumulators = static_cast<int>(64 / P::kChunk);

    // Inlined into the walk: attention's scores are one 64-element output a call, whose
    // fold no call boundary should keep from overlapping the next.
    template <int R, int T>
    [[gnu::always_inline]] static inline void run(const MatmulTask& task, std::size_t r0, std::size_t t0) {
        const TileRows<typename P::Element, R, T> rows(task, r0, t0);
        typename P::Accumulator acc[R][T][kAccumulators];
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t)
                for (int q = 0; q < kAccumulators; ++q) acc[r][t][q] = P::zero();

        const std::size_t n = task.cols;
        const std::size_t blocked = n - n % 64;
        const NextRowsPrefetch prefetch(task, r0 + R, T == 1 ? R : 0, blocked / 64, n * sizeof(typename P::Element));
        using Mode = typename FmaModeOf<P>::type;
        {
            [[maybe_unused]] const Mode mode;
            pin_each<Mode>(acc);
            for (std::size_t k = 0; k < blocked; k += 64) {
                prefetch(k / 64);
                for (int q = 0; q < kAccumulators; ++q) {
                    typename P::Vector wv[R];
                    for (int r = 0; r < R; ++r) wv[r] = P::load(rows.w[r] + k + q * P::kChunk);
                    for (int t = 0; t < T; ++t) {
                        const typename P::Vector av = P::load(rows.a[t] + k + q * P::kChunk);
                        for (int r = 0; r < R; ++r) acc[r][t][q] = P::accumulate(acc[r][t][q], wv[r], av);
                    }
                }
            }
            pin_each<Mode>(acc);
        }
        pin_each<Mode>(acc);
        for (int r = 0; r < R; ++r) {
            for (int t = 0; t < T; ++t) {
                task.out[(t0 + t) * task.out_stride + r0 + r] =
                    P::finish_vec_dot(acc[r][t], rows.w[r] + blocked, rows.a[t] + blocked, n - blocked);
            }
        }
    }
};

}  // namespace
}  // namespace ember::kernels::fast
