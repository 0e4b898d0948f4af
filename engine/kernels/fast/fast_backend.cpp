#include "kernels/fast/fast_backend.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.hpp"
#include "kernels/fast/aligned_buffer.hpp"
#include "kernels/kernel_names.hpp"
#include "kernels/fast/attention.hpp"
#include "kernels/fast/matmul.hpp"
#include "kernels/fast/row_ops.hpp"
#include "kernels/fast/thread_pool.hpp"
#include "kernels/reference/kernels.hpp"

namespace ember::kernels::fast {
namespace {

// A buffer that only grows (allocating at most when a larger shape first appears).
void grow(AlignedBuffer& buffer, std::size_t bytes) {
    if (buffer.size() < bytes) buffer = AlignedBuffer(bytes);
}

class FastBackend final : public Backend {
public:
    // Builds llama.cpp's GELU table now (once per process), not in the first evaluation.
    explicit FastBackend(const KernelSet& kernels) : k_(kernels), pool_(ThreadPool::callers()) {
        reference::gelu_f16_table_values();
    }

    std::string_view route() const override { return "fast"; }
    std::string_view variant() const override { return k_.description; }

    std::string_view kernel_name(KernelId kernel, gguf::GgmlType weight_type) const override {
        switch (kernel) {
            case KernelId::Matmul: return format_kernel_name(FormatKernel::fast_matmul, weight_type);
            case KernelId::RmsNorm: return "fast.rms_norm";
            case KernelId::StoreKv: return "fast.store_kv";
            case KernelId::Attention: return "fast.attention";
            case KernelId::Swiglu: return "fast.swiglu";
            case KernelId::GetRows: return format_kernel_name(FormatKernel::reference_get_rows, weight_type);
            case KernelId::Rope: return "reference.rope";
            case KernelId::Geglu: return "fast.geglu_f16_table";
            case KernelId::Gelu: return "reference.gelu_f16_table";
            case KernelId::Add: return "reference.add";
            case KernelId::Mul: return "reference.mul";
            case KernelId::Scale: return "reference.scale";
            case KernelId::Softcap: return "reference.softcap";
            case KernelId::Copy: return "reference.copy";
        }
        return "fast";
    }

    void reserve(const ScratchLimits& limits) override {
        // Converted activations: the widest input in the widest conversion of the table.
        grow(activations_, widest_activation_workspace_bytes(limits.max_matmul_cols, limits.max_tokens));
        // Attention: per thread, the scores of one KV head's query heads (at most all
        // heads) and their F16-rounded queries.
        const AttentionShape widest{limits.max_heads, 1, limits.max_head_dim, 1.0f, 0};
        grow(attention_scratch_, attention_workspace_bytes(pool_.threads(), widest, limits.max_context));
        max_tokens_ = limits.max_tokens;
    }

    void get_rows(const WeightMatrix& table, std::span<const std::int32_t> ids, Rows out) override {
        reference::get_rows(table, ids, out);
    }

    void matmul(ConstRows x, const WeightMatrix& w, Rows y) override {
        if (x.cols != w.cols || y.cols != w.rows || y.rows != x.rows) {
            throw Error(fmt::format("matmul: [{} x {}] times a [{} x {}] weight into [{} x {}]", x.rows, x.cols, w.rows,
                                    w.cols, y.rows, y.cols));
        }
        grow(activations_, activation_workspace_bytes(w.type, w.cols, std::max(x.rows, max_tokens_)));
        fast::matmul(k_, pool_, w, convert(x, w.type), y.data, y.stride);
    }

    void rms_norm(ConstRows x, std::span<const float> weight, float eps, Rows y) override {
        fast::rms_norm(pool_, x.data, x.stride, weight.empty() ? nullptr : weight.data(), eps, y.data, y.stride, x.rows, x.cols);
    }

    void rope(Rows x, std::size_t first_position, const RopeParams& params) override {
        reference::rope(x, first_position, params);
    }

    void store_kv(ConstRows x, KvRows dst) override {
        if (x.rows != dst.rows || x.cols != dst.cols) {
            throw Error(fmt::format("store_kv: [{} x {}] into {} cached rows of {}", x.rows, x.cols, dst.rows, dst.cols));
        }
        fast::store_kv(k_, pool_, x.data, x.stride, x.rows, x.cols, dst.type, dst.data, dst.row_bytes);
    }

    void attention(ConstRows q, ConstKvRows keys, ConstKvRows values, std::size_t first_position, const AttentionParams& params,
                   Rows out, Rows pattern) override {
        if (keys.row_bytes != values.row_bytes || keys.type != values.type) {
            throw Error("attention: keys and values with different row strides or types");
        }
        const AttentionShape shape{params.n_head, params.n_head_kv, params.head_dim, params.scale, params.window};
        grow(attention_scratch_, attention_workspace_bytes(pool_.threads(), shape, keys.rows));
        const KvCacheView kv{keys.type, keys.data, values.data, keys.row_bytes, keys.rows};
        fast::attention(k_, pool_, q.data, q.stride, q.rows, kv, first_position, shape, out.data, out.stride,
                        attention_scratch_.span(), pattern.data);
    }

    void swiglu(ConstRows gate, ConstRows up, Rows out) override {
        fast::swiglu(k_, pool_, gate.data, gate.stride, up.data, up.stride, out.data, out.stride, out.rows, out.cols);
    }
    void geglu(ConstRows gate, ConstRows up, Rows out) override {
        fast::geglu(k_, pool_, gate.data, gate.stride, up.data, up.stride, out.data, out.stride, out.rows, out.cols);
    }
    void gelu(ConstRows x, Rows out) override { reference::gelu(x, out); }
    void add(ConstRows a, ConstRows b, Rows out) override { reference::add(a, b, out); }
    void mul(ConstRows a, ConstRows b, Rows out) override { reference::mul(a, b, out); }
    void scale(ConstRows x, float factor, Rows out) override { reference::scale(x, factor, out); }
    void softcap(ConstRows x, float cap, Rows out) override { reference::softcap(x, cap, out); }
    void copy(ConstRows x, Rows out) override { reference::copy(x, out); }

private:
    // x in the form a `type` weight's product reads: F32 rows are used in place (any
    // stride); other types are converted into the activation workspace.
    ConvertedActivations convert(ConstRows x, gguf::GgmlType type) {
        if (type == gguf::GgmlType::F32) {
            return {type, reinterpret_cast<const std::byte*>(x.data), x.stride * sizeof(float), x.rows, x.cols};
        }
        if (x.contiguous()) return convert_activations(k_, pool_, type, x.data, x.rows, x.cols, activations_.span());
        const std::size_t row_bytes = activation_row_bytes(type, x.cols);
        for (std::size_t r = 0; r < x.rows; ++r) {
            convert_activations(k_, pool_, type, x.row(r), 1, x.cols, activations_.span().subspan(r * row_bytes));
        }
        return {type, activations_.data(), row_bytes, x.rows, x.cols};
    }

    const KernelSet& k_;
    ThreadPool pool_;
    std::size_t max_tokens_ = 1;
    AlignedBuffer activations_;        // converted activations of one product
    AlignedBuffer attention_scratch_;  // per-thread attention scores
};

}  // namespace

std::unique_ptr<Backend> make_fast_backend(const KernelSet& kernels) { return std::make_unique<FastBackend>(kernels); }

}  // namespace ember::kernels::fast
