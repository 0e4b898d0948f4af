// The backward of every operation of the reference route, next to the forward it undoes
// (engine/kernels/reference). Weights are constants: each function returns the gradient
// of a scalar metric M with respect to the operation's *activation* inputs, given dM/d
// output. Shapes are in each declaration; "d" names a gradient (dy = dM/dy). Sums over a
// row or a sequence accumulate in double; results are F32 like the activations.
//
// The forward is not repeated here: gradient_forward.cpp calls the reference kernels
// themselves, so the activations are bit-for-bit those of the reference route.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/rows.hpp"
#include "kernels/weight.hpp"

namespace ember::attribution {

using kernels::ConstRows;
using kernels::Rows;

// Forward: y[t][o] = sum_i W[o][i] x[t][i]        x: [T, in], W: [out, in], y: [T, out]
// Backward: dx[t][i] = sum_o dy[t][o] W[o][i]     (dy: [T, out] -> dx: [T, in], overwritten)
// W is dequantized a chunk of rows at a time (llama.cpp's dequantize_row_*), so the LM
// head of a large vocabulary never exists in F32 at once; each dx value is summed over o
// in ascending order in double, whatever the thread count.
void matmul_backward(ConstRows dy, const kernels::WeightMatrix& w, Rows dx);

// Forward: y = x * s * w,  s = 1 / sqrt(mean(x^2) + eps)       (w empty: no weight)
// Backward, with g = dy * w:
//   ds/dx_j = -s^3 x_j / n, so dx_j = s g_j - (s^3 / n) x_j sum_c g_c x_c.
// x, dy, dx: [R, n]; dx is overwritten (it may alias dy).
void rms_norm_backward(ConstRows x, std::span<const float> weight, float eps, ConstRows dy, Rows dx);

// Forward (per pair (a, b), angle theta of position and pair, YaRN magnitude m):
//   a' = m (a cos - b sin),  b' = m (a sin + b cos)
// a rotation (times m), so the backward is its transpose:
//   da = m (da' cos + db' sin),  db = m (-da' sin + db' cos)
// The (m cos, m sin) are the reference kernel's own: rope_factors() rotates the unit
// vector (1, 0) of every pair with kernels::reference::rope. Dimensions past n_rot are
// copied forward, so their gradient passes through. dx: [T, n_heads * head_dim], in place.
struct RopeFactors {
    std::size_t pairs = 0;
    std::vector<float> cos;  // [T, pairs]  m cos(theta)
    std::vector<float> sin;  // [T, pairs]  m sin(theta)
};
RopeFactors rope_factors(std::size_t rows, std::size_t first_position, const kernels::RopeParams& params);
void rope_backward(Rows dx, const RopeFactors& factors, const kernels::RopeParams& params);

// Forward (reference::attention), per query head h, query t at position p, the visible
// keys j (causal, and within the window when there is one), the KV head h / group:
//   s_j = scale q.k_j;  P_j = softmax_j(s);  out = sum_j P_j v_j
// Backward, given d out:
//   dP_j = d out . v_j
//   ds_j = P_j (dP_j - sum_i P_i dP_i)          (the softmax Jacobian)
//   dq   = scale sum_j ds_j k_j
//   dk_j += scale ds_j q,  dv_j += P_j d out   (summed over the queries and the group's heads)
// q: [T, H * D]; k, v: [T, Hkv * D]; pattern: [H * T, T], row h * T + t (the forward's P);
// dout: [T, H * D] -> dq [T, H * D] (overwritten), dk, dv [T, Hkv * D] (added to), and
// dpattern [H * T, T] (the gradient with respect to P itself, 0 where masked; overwritten).
void attention_backward(ConstRows q, ConstRows k, ConstRows v, ConstRows pattern, const kernels::AttentionParams& params,
                        ConstRows dout, Rows dq, Rows dk, Rows dv, Rows dpattern);

// Forward: out = silu(g) u, silu(g) = g sigma(g)
// Backward: du = d out silu(g);  dg = d out u sigma(g) (1 + g (1 - sigma(g)))
void swiglu_backward(ConstRows gate, ConstRows up, ConstRows dout, Rows dgate, Rows dup);

// llama.cpp's GELU is a table of F16 results (piecewise constant: its own derivative is 0
// almost everywhere, which says nothing about the model). The gradient used is that of
// the smooth function the table samples, at the input:
//   gelu(x) = x/2 (1 + tanh(z)),  z = c (x + a x^3)
//   gelu'(x) = (1 + tanh z)/2 + x/2 (1 - tanh^2 z) c (1 + 3 a x^2)
// and, as the forward, exactly 0 for x <= -10 and 1 for x >= 10 (the table's pass-through).
double gelu_derivative(float x);
// Forward: out = gelu(g) u (0 for g <= -10).  Backward: du = d out gelu(g), dg = d out u gelu'(g).
void geglu_backward(ConstRows gate, ConstRows up, ConstRows dout, Rows dgate, Rows dup);
// Forward: y = gelu(x).  Backward: dx = dy gelu'(x). dx may alias dy.
void gelu_backward(ConstRows x, ConstRows dy, Rows dx);

// Forward: y = cap tanh(z / cap) (reference::softcap: z times the float 1/cap).
// Backward: dz = dy cap (1/cap) (1 - tanh^2(z / cap)). dz may alias dy.
void softcap_backward(ConstRows z, float cap, ConstRows dy, Rows dz);

// y = a + b: da += dy, db += dy (add_into); y = x f: dx = dy f (scale_into).
void add_into(ConstRows src, Rows dst);
void scale_into(ConstRows src, float factor, Rows dst);

}  // namespace ember::attribution
