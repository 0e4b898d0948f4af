#include "models/feed_forward.hpp"

namespace ember::models {

using kernels::OpKind;
using kernels::Rows;

FeedForward load_feed_forward(const TensorLoader& t, std::uint32_t layer, std::size_t n_embd, std::size_t n_ff) {
    auto name = [layer](const char* n) { return TensorLoader::layer_weight(layer, n); };
    FeedForward w;
    w.norm = t.vector(name("ffn_norm"), n_embd);
    w.gate = t.matrix(name("ffn_gate"), n_ff, n_embd);
    w.up = t.matrix(name("ffn_up"), n_ff, n_embd);
    w.down = t.matrix(name("ffn_down"), n_embd, n_ff);
    return w;
}

Rows feed_forward_input(kernels::Ops& ops, std::int32_t layer, const FeedForward& w, float eps, kernels::ConstRows x,
                        Workspace& ws) {
    Rows h = Workspace::rows(ws.normed, x.rows, x.cols);  // [T, n_embd]
    ops.rms_norm({"ffn_norm", layer, OpKind::Norm}, x, w.norm, eps, h);
    return h;
}

Rows feed_forward_activation(kernels::Ops& ops, std::int32_t layer, GateActivation activation, const FeedForward& w,
                             kernels::ConstRows h, Workspace& ws) {
    const std::size_t T = h.rows;
    const std::size_t n_ff = w.gate.rows;
    Rows gate = Workspace::rows(ws.gate, T, n_ff);           // [T, n_ff]
    Rows up = Workspace::rows(ws.up, T, n_ff);               // [T, n_ff]
    Rows hidden = Workspace::rows(ws.ffn_hidden, T, n_ff);   // [T, n_ff]
    ops.matmul({"ffn_gate", layer, OpKind::Projection}, h, w.gate, gate);
    ops.matmul({"ffn_up", layer, OpKind::Projection}, h, w.up, up);
    if (activation == GateActivation::Silu) {
        ops.swiglu({"ffn_swiglu", layer, OpKind::Activation}, gate, up, hidden);
    } else {
        ops.geglu({"ffn_geglu", layer, OpKind::Activation}, gate, up, hidden);
    }
    return hidden;
}

}  // namespace ember::models
