#include "attribution/gradient_ops.hpp"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cassert>
#include <cmath>

#include "kernels/reference/kernels.hpp"

namespace ember::attribution {
namespace {

// Rows of W dequantized at once by matmul_backward: about 16 MB of F32.
constexpr std::size_t kChunkFloats = std::size_t{4} << 20;
// Columns of dx one task owns.
constexpr std::size_t kColumnBlock = 64;

}  // namespace

void matmul_backward(ConstRows dy, const kernels::WeightMatrix& w, Rows dx) {
    assert(dy.cols == w.rows && dx.cols == w.cols && dx.rows == dy.rows);
    const std::size_t T = dy.rows;
    const std::size_t in = w.cols;
    const std::size_t chunk_rows = std::max<std::size_t>(1, std::min(w.rows, kChunkFloats / std::max<std::size_t>(1, in)));
    std::vector<float> rows(chunk_rows * in);  // [chunk_rows, in] dequantized W rows
    std::vector<double> acc(T * in, 0.0);      // [T, in]
    for (std::size_t o0 = 0; o0 < w.rows; o0 += chunk_rows) {
        const std::size_t n = std::min(chunk_rows, w.rows - o0);
        tbb::parallel_for(std::size_t{0}, n, [&](std::size_t r) {
            kernels::reference::dequantize_row(w.type, w.row(o0 + r), rows.data() + r * in, in);
        });
        const std::size_t blocks = (in + kColumnBlock - 1) / kColumnBlock;
        tbb::parallel_for(std::size_t{0}, blocks, [&](std::size_t b) {
            const std::size_t i0 = b * kColumnBlock;
            const std::size_t i1 = std::min(in, i0 + kColumnBlock);
            for (std::size_t t = 0; t < T; ++t) {
                double* a = acc.data() + t * in;
                const float* g = dy.row(t) + o0;
                for (std::size_t o = 0; o < n; ++o) {
                    const double d = g[o];
                    if (d == 0.0) continue;  // rows the metric does not read (exactly: 0 * w adds 0)
                    const float* wr = rows.data() + o * in;
                    for (std::size_t i = i0; i < i1; ++i) a[i] += d * wr[i];
                }
            }
        });
    }
    for (std::size_t t = 0; t < T; ++t)
        for (std::size_t i = 0; i < in; ++i) dx.row(t)[i] = static_cast<float>(acc[t * in + i]);
}

void rms_norm_backward(ConstRows x, std::span<const float> weight, float eps, ConstRows dy, Rows dx) {
    assert(x.rows == dy.rows && x.cols == dy.cols && dx.rows == x.rows && dx.cols == x.cols);
    const std::size_t n = x.cols;
    for (std::size_t r = 0; r < x.rows; ++r) {
        const float* in = x.row(r);
        // s exactly as the forward computes it (sum of float squares in double, mean in float).
        double sum = 0.0;
        for (std::size_t c = 0; c < n; ++c) sum += static_cast<double>(in[c] * in[c]);
        const auto mean = static_cast<float>(sum / static_cast<double>(n));
        const double s = 1.0 / std::sqrt(static_cast<double>(mean + eps));
        double gx = 0.0;  // sum_c g_c x_c
        for (std::size_t c = 0; c < n; ++c) {
            const double g = static_cast<double>(dy.row(r)[c]) * (weight.empty() ? 1.0 : weight[c]);
            gx += g * in[c];
        }
        const double k = s * s * s / static_cast<double>(n) * gx;
        for (std::size_t c = 0; c < n; ++c) {
            const double g = static_cast<double>(dy.row(r)[c]) * (weight.empty() ? 1.0 : weight[c]);
            dx.row(r)[c] = static_cast<float>(s * g - k * in[c]);
        }
    }
}

RopeFactors rope_factors(std::size_t rows, std::size_t first_position, const kernels::RopeParams& params) {
    kernels::RopeParams one = params;
    one.n_heads = 1;
    const std::size_t pairs = params.n_rot / 2;
    std::vector<float> probe(rows * params.head_dim, 0.0f);  // [T, head_dim]: (1, 0) in every pair
    for (std::size_t t = 0; t < rows; ++t) {
        float* head = probe.data() + t * params.head_dim;
        for (std::size_t i = 0; i < pairs; ++i) head[params.pairing == kernels::RopePairing::Adjacent ? 2 * i : i] = 1.0f;
    }
    kernels::reference::rope(Rows(probe.data(), rows, params.head_dim), first_position, one);
    RopeFactors f;
    f.pairs = pairs;
    f.cos.resize(rows * pairs);
    f.sin.resize(rows * pairs);
    for (std::size_t t = 0; t < rows; ++t) {
        const float* head = probe.data() + t * params.head_dim;
        for (std::size_t i = 0; i < pairs; ++i) {
            const bool adjacent = params.pairing == kernels::RopePairing::Adjacent;
            f.cos[t * pairs + i] = head[adjacent ? 2 * i : i];
            f.sin[t * pairs + i] = head[adjacent ? 2 * i + 1 : i + pairs];
        }
    }
    return f;
}

void rope_backward(Rows dx, const RopeFactors& f, const kernels::RopeParams& p) {
    assert(dx.cols == p.n_heads * p.head_dim && f.cos.size() == dx.rows * f.pairs);
    for (std::size_t t = 0; t < dx.rows; ++t) {
        for (std::size_t h = 0; h < p.n_heads; ++h) {
            float* head = dx.row(t) + h * p.head_dim;
            for (std::size_t i = 0; i < f.pairs; ++i) {
                const bool adjacent = p.pairing == kernels::RopePairing::Adjacent;
                float& a = head[adjacent ? 2 * i : i];
                float& b = head[adjacent ? 2 * i + 1 : i + f.pairs];
                const double c = f.cos[t * f.pairs + i];
                const double s = f.sin[t * f.pairs + i];
                const double da = a;
                const double db = b;
                a = static_cast<float>(da * c + db * s);
                b = static_cast<float>(-da * s + db * c);
            }
        }
    }
}

void attention_backward(ConstRows q, ConstRows k, ConstRows v, ConstRows pattern, const kernels::AttentionParams& params,
                        ConstRows dout, Rows dq, Rows dk, Rows dv, Rows dpattern) {
    const std::size_t T = q.rows;
    const std::size_t D = params.head_dim;
    const std::size_t group = params.n_head / params.n_head_kv;
    assert(pattern.rows == params.n_head * T && pattern.cols == T && dpattern.rows == pattern.rows);
    // One task per KV head: it owns dk and dv of that head, and dq, dpattern of its group.
    tbb::parallel_for(std::size_t{0}, params.n_head_kv, [&](std::size_t kv) {
        std::vector<double> dk_acc(T * D, 0.0);  // [T, D]
        std::vector<double> dv_acc(T * D, 0.0);  // [T, D]
        std::vector<double> dp(T);       // dP of one query row
        std::vector<double> dq_acc(D);   // dq of one query row and head
        for (std::size_t h = kv * group; h < (kv + 1) * group; ++h) {
            for (std::size_t t = 0; t < T; ++t) {
                const float* P = pattern.row(h * T + t);
                const float* g = dout.row(t) + h * D;
                const float* qh = q.row(t) + h * D;
                float* dP = dpattern.row(h * T + t);
                std::fill(dP, dP + T, 0.0f);
                // The visible keys: causal, and within the window when there is one.
                const std::size_t begin = params.window == 0 || t < params.window ? 0 : t - params.window + 1;
                double pdp = 0.0;  // sum_i P_i dP_i
                for (std::size_t j = begin; j <= t; ++j) {
                    const float* vj = v.row(j) + kv * D;
                    double s = 0.0;
                    for (std::size_t d = 0; d < D; ++d) s += static_cast<double>(g[d]) * vj[d];
                    dp[j] = s;
                    dP[j] = static_cast<float>(s);
                    pdp += static_cast<double>(P[j]) * s;
                }
                std::fill(dq_acc.begin(), dq_acc.end(), 0.0);
                for (std::size_t j = begin; j <= t; ++j) {
                    const double ds = static_cast<double>(P[j]) * (dp[j] - pdp) * params.scale;
                    const float* kj = k.row(j) + kv * D;
                    double* dkj = dk_acc.data() + j * D;
                    double* dvj = dv_acc.data() + j * D;
                    for (std::size_t d = 0; d < D; ++d) {
                        dq_acc[d] += ds * kj[d];
                        dkj[d] += ds * qh[d];
                        dvj[d] += static_cast<double>(P[j]) * g[d];
                    }
                }
                float* dqh = dq.row(t) + h * D;
                for (std::size_t d = 0; d < D; ++d) dqh[d] = static_cast<float>(dq_acc[d]);
            }
        }
        for (std::size_t j = 0; j < T; ++j) {
            for (std::size_t d = 0; d < D; ++d) {
                dk.row(j)[kv * D + d] += static_cast<float>(dk_acc[j * D + d]);
                dv.row(j)[kv * D + d] += static_cast<float>(dv_acc[j * D + d]);
            }
        }
    });
}

namespace {
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
}  // namespace

void swiglu_backward(ConstRows gate, ConstRows up, ConstRows dout, Rows dgate, Rows dup) {
    for (std::size_t r = 0; r < gate.rows; ++r) {
        for (std::size_t c = 0; c < gate.cols; ++c) {
            const double g = gate.row(r)[c];
            const double u = up.row(r)[c];
            const double d = dout.row(r)[c];
            const double sg = sigmoid(g);
            dup.row(r)[c] = static_cast<float>(d * g * sg);
            dgate.row(r)[c] = static_cast<float>(d * u * sg * (1.0 + g * (1.0 - sg)));
        }
    }
}

double gelu_derivative(float x) {
    if (x <= -10.0f) return 0.0;
    if (x >= 10.0f) return 1.0;
    constexpr double c = 0.79788456080286535587989211986876;  // sqrt(2 / pi)
    constexpr double a = 0.044715;
    const double xd = x;
    const double th = std::tanh(c * (xd + a * xd * xd * xd));
    return 0.5 * (1.0 + th) + 0.5 * xd * (1.0 - th * th) * c * (1.0 + 3.0 * a * xd * xd);
}

void geglu_backward(ConstRows gate, ConstRows up, ConstRows dout, Rows dgate, Rows dup) {
    for (std::size_t r = 0; r < gate.rows; ++r) {
        for (std::size_t c = 0; c < gate.cols; ++c) {
            const float g = gate.row(r)[c];
            const double d = dout.row(r)[c];
            const double value = g <= -10.0f ? 0.0 : kernels::reference::gelu_f16_table(g);
            dup.row(r)[c] = static_cast<float>(d * value);
            dgate.row(r)[c] = static_cast<float>(d * up.row(r)[c] * gelu_derivative(g));
        }
    }
}

void gelu_backward(ConstRows x, ConstRows dy, Rows dx) {
    for (std::size_t r = 0; r < x.rows; ++r)
        for (std::size_t c = 0; c < x.cols; ++c)
            dx.row(r)[c] = static_cast<float>(dy.row(r)[c] * gelu_derivative(x.row(r)[c]));
}

void softcap_backward(ConstRows z, float cap, ConstRows dy, Rows dz) {
    const float inverse = 1.0f / cap;
    for (std::size_t r = 0; r < z.rows; ++r) {
        for (std::size_t c = 0; c < z.cols; ++c) {
            const double th = std::tanh(static_cast<double>(z.row(r)[c] * inverse));
            dz.row(r)[c] = static_cast<float>(dy.row(r)[c] * static_cast<double>(cap) * inverse * (1.0 - th * th));
        }
    }
}

void add_into(ConstRows src, Rows dst) {
    for (std::size_t r = 0; r < src.rows; ++r)
        for (std::size_t c = 0; c < src.cols; ++c) dst.row(r)[c] += src.row(r)[c];
}

void scale_into(ConstRows src, float factor, Rows dst) {
    for (std::size_t r = 0; r < src.rows; ++r)
        for (std::size_t c = 0; c < src.cols; ++c) dst.row(r)[c] = src.row(r)[c] * factor;
}

}  // namespace ember::attribution
