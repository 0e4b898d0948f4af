// The call sites of a forward pass. Model code runs every operation through an Ops
// object, naming it the way llama.cpp names its graph nodes ("attn_q" in layer 3) and
// saying what kind of operation it is. Ops forwards the call to the Backend of the
// chosen route and, only when an observer is attached (tracing), times it and reports an
// OpRecord: name, kind, layer, shapes, bytes, estimated FLOPs, route, kernel and CPU
// variant (all three asked of the Backend). With no observer the cost is one predictable
// branch per operation. The session tells the observer where each evaluation begins
// (begin_evaluation), so that a journal knows the phase and step of every operation.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "kernels/backend.hpp"

namespace ember::kernels {

enum class OpKind {
    Embedding, Norm, Projection, Rope, KvStore, Attention, Activation, ResidualAdd, Scale, Multiply, LmHead,
    Softcap, Sampling,
};

inline std::string_view op_kind_name(OpKind kind) {
    switch (kind) {
        case OpKind::Embedding: return "embedding";
        case OpKind::Norm: return "norm";
        case OpKind::Projection: return "projection";
        case OpKind::Rope: return "rope";
        case OpKind::KvStore: return "kv_store";
        case OpKind::Attention: return "attention";
        case OpKind::Activation: return "activation";
        case OpKind::ResidualAdd: return "residual_add";
        case OpKind::Scale: return "scale";
        case OpKind::Multiply: return "multiply";
        case OpKind::LmHead: return "lm_head";
        case OpKind::Softcap: return "softcap";
        case OpKind::Sampling: return "sampling";
    }
    return "unknown";
}

inline constexpr std::int32_t kNoLayer = -1;  // model-level operations (embedding, final norm, LM head)

// Where an operation is in the model: {"attn_q", 3, OpKind::Projection}.
struct OpSite {
    std::string_view name;
    std::int32_t layer = kNoLayer;
    OpKind kind = OpKind::Projection;
};

// What one operation did; handed to the observer after the operation ran.
struct OpRecord {
    OpSite site;
    std::string_view route;
    std::string_view kernel;
    std::string_view variant;  // Backend::variant(); empty for work outside the backend (sampling)
    std::optional<gguf::GgmlType> weight_type;
    std::array<std::size_t, 2> input_shape{};   // [rows, cols] of the main activation input
    std::array<std::size_t, 2> output_shape{};  // [rows, cols]
    std::uint64_t input_bytes = 0;              // activations read plus weight bytes read
    std::uint64_t output_bytes = 0;
    std::uint64_t estimated_flops = 0;
    std::uint64_t duration_ns = 0;
    std::chrono::steady_clock::time_point start{};  // when the operation began
};

// One evaluation of the model, announced before its first operation.
struct EvaluationMark {
    std::string_view phase;  // "prefill" or "decode"
    std::size_t step = 0;    // 0 for the prefill, then 1, 2, ... per decode evaluation
    std::size_t start_position = 0;
    std::size_t n_tokens = 0;
};

class OpObserver {
public:
    virtual ~OpObserver() = default;
    virtual void begin_evaluation(const EvaluationMark& /*mark*/) {}
    virtual void on_op(const OpRecord& record) = 0;
};

class Ops {
public:
    explicit Ops(Backend& backend, OpObserver* observer = nullptr) : backend_(backend), observer_(observer) {}

    Backend& backend() const { return backend_; }
    OpObserver* observer() const { return observer_; }
    void set_observer(OpObserver* observer) { observer_ = observer; }

    void get_rows(const OpSite& site, const WeightMatrix& table, std::span<const std::int32_t> ids, Rows out) {
        run(site, KernelId::GetRows, [&] { backend_.get_rows(table, ids, out); }, [&](OpRecord& r) {
            r.weight_type = table.type;
            r.input_shape = {ids.size(), 1};
            r.input_bytes = ids.size() * (sizeof(std::int32_t) + table.row_bytes);
            r.output_shape = shape(out);
            r.output_bytes = bytes(out);
        });
    }

    void matmul(const OpSite& site, ConstRows x, const WeightMatrix& w, Rows y) {
        run(site, KernelId::Matmul, [&] { backend_.matmul(x, w, y); }, [&](OpRecord& r) {
            r.weight_type = w.type;
            r.input_shape = shape(x);
            r.input_bytes = bytes(x) + w.rows * w.row_bytes;
            r.output_shape = shape(y);
            r.output_bytes = bytes(y);
            r.estimated_flops = 2ull * x.rows * w.cols * w.rows;
        });
    }

    void rms_norm(const OpSite& site, ConstRows x, std::span<const float> weight, float eps, Rows y) {
        run(site, KernelId::RmsNorm, [&] { backend_.rms_norm(x, weight, eps, y); }, [&](OpRecord& r) {
            elementwise(r, x, y, weight.empty() ? 3 : 4);
            r.input_bytes += weight.size_bytes();
        });
    }

    void rope(const OpSite& site, Rows x, std::size_t first_position, const RopeParams& params) {
        run(site, KernelId::Rope, [&] { backend_.rope(x, first_position, params); }, [&](OpRecord& r) {
            elementwise(r, x, x, 0);
            r.estimated_flops = 3ull * x.rows * params.n_heads * params.n_rot;
        });
    }

    void store_kv(const OpSite& site, ConstRows x, KvRows dst) {
        run(site, KernelId::StoreKv, [&] { backend_.store_kv(x, dst); }, [&](OpRecord& r) {
            r.input_shape = shape(x);
            r.input_bytes = bytes(x);
            r.output_shape = {dst.rows, dst.cols};
            r.output_bytes = ConstKvRows(dst).bytes();
        });
    }

    // pattern: empty, or [n_head * T, n_kv] for the probabilities (Backend::attention).
    void attention(const OpSite& site, ConstRows q, ConstKvRows keys, ConstKvRows values, std::size_t first_position,
                   const AttentionParams& params, Rows out, Rows pattern = {}) {
        run(site, KernelId::Attention, [&] { backend_.attention(q, keys, values, first_position, params, out, pattern); },
            [&](OpRecord& r) {
                r.input_shape = shape(q);
                r.input_bytes = bytes(q) + keys.bytes() + values.bytes();
                r.output_shape = shape(out);
                r.output_bytes = bytes(out);
                // q.k and p.v over every cached position, masked ones included.
                r.estimated_flops = 4ull * q.rows * params.n_head * params.head_dim * keys.rows;
            });
    }

    void swiglu(const OpSite& site, ConstRows gate, ConstRows up, Rows out) {
        run(site, KernelId::Swiglu, [&] { backend_.swiglu(gate, up, out); }, [&](OpRecord& r) {
            elementwise(r, gate, out, 5);
            r.input_bytes += bytes(up);
        });
    }
    void geglu(const OpSite& site, ConstRows gate, ConstRows up, Rows out) {
        run(site, KernelId::Geglu, [&] { backend_.geglu(gate, up, out); }, [&](OpRecord& r) {
            elementwise(r, gate, out, 2);
            r.input_bytes += bytes(up);
        });
    }
    void gelu(const OpSite& site, ConstRows x, Rows out) {
        run(site, KernelId::Gelu, [&] { backend_.gelu(x, out); }, [&](OpRecord& r) { elementwise(r, x, out, 1); });
    }
    void add(const OpSite& site, ConstRows a, ConstRows b, Rows out) {
        run(site, KernelId::Add, [&] { backend_.add(a, b, out); }, [&](OpRecord& r) {
            elementwise(r, a, out, 1);
            r.input_bytes += bytes(b);
        });
    }
    void mul(const OpSite& site, ConstRows a, ConstRows b, Rows out) {
        run(site, KernelId::Mul, [&] { backend_.mul(a, b, out); }, [&](OpRecord& r) {
            elementwise(r, a, out, 1);
            r.input_bytes += bytes(b);
        });
    }
    void scale(const OpSite& site, ConstRows x, float factor, Rows out) {
        run(site, KernelId::Scale, [&] { backend_.scale(x, factor, out); }, [&](OpRecord& r) { elementwise(r, x, out, 1); });
    }
    void softcap(const OpSite& site, ConstRows x, float cap, Rows out) {
        run(site, KernelId::Softcap, [&] { backend_.softcap(x, cap, out); }, [&](OpRecord& r) { elementwise(r, x, out, 3); });
    }
    void copy(const OpSite& site, ConstRows x, Rows out) {
        run(site, KernelId::Copy, [&] { backend_.copy(x, out); }, [&](OpRecord& r) { elementwise(r, x, out, 0); });
    }

private:
    static std::array<std::size_t, 2> shape(ConstRows x) { return {x.rows, x.cols}; }
    static std::uint64_t bytes(ConstRows x) { return std::uint64_t{x.rows} * x.cols * sizeof(float); }
    static void elementwise(OpRecord& r, ConstRows in, ConstRows out, std::uint64_t flops_per_value) {
        r.input_shape = shape(in);
        r.input_bytes = bytes(in);
        r.output_shape = shape(out);
        r.output_bytes = bytes(out);
        r.estimated_flops = flops_per_value * out.rows * out.cols;
    }

    // Runs `op`; when observed, times it and reports the record that `describe` fills in.
    template <class Op, class Describe>
    void run(const OpSite& site, KernelId kernel, Op&& op, Describe&& describe) {
        if (observer_ == nullptr) {
            op();
            return;
        }
        const auto start = std::chrono::steady_clock::now();
        op();
        const auto end = std::chrono::steady_clock::now();
        OpRecord record;
        record.site = site;
        describe(record);
        record.route = backend_.route();
        record.kernel = backend_.kernel_name(kernel, record.weight_type.value_or(gguf::GgmlType::F32));
        record.variant = backend_.variant();
        record.start = start;
        record.duration_ns = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count());
        observer_->on_op(record);
    }

    Backend& backend_;
    OpObserver* observer_ = nullptr;
};

}  // namespace ember::kernels
