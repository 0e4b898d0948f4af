#include "kernels/reference/reference_backend.hpp"

#include <vector>

#include "kernels/kernel_names.hpp"
#include "kernels/reference/kernels.hpp"

namespace ember::kernels::reference {
namespace {

class ReferenceBackend final : public Backend {
public:
    // Builds llama.cpp's GELU table now (once per process), not in the first evaluation.
    ReferenceBackend() { gelu_f16_table_values(); }

    std::string_view route() const override { return "reference"; }
    std::string_view variant() const override { return "scalar-reference"; }

    std::string_view kernel_name(KernelId kernel, gguf::GgmlType weight_type) const override {
        switch (kernel) {
            case KernelId::GetRows: return format_kernel_name(FormatKernel::reference_get_rows, weight_type);
            case KernelId::Matmul: return format_kernel_name(FormatKernel::reference_matmul, weight_type);
            case KernelId::RmsNorm: return "reference.rms_norm";
            case KernelId::Rope: return "reference.rope";
            case KernelId::StoreKv: return "reference.store_kv";
            case KernelId::Attention: return "reference.attention";
            case KernelId::Swiglu: return "reference.swiglu";
            case KernelId::Geglu: return "reference.geglu_f16_table";
            case KernelId::Gelu: return "reference.gelu_f16_table";
            case KernelId::Add: return "reference.add";
            case KernelId::Mul: return "reference.mul";
            case KernelId::Scale: return "reference.scale";
            case KernelId::Softcap: return "reference.softcap";
            case KernelId::Copy: return "reference.copy";
        }
        return "reference";
    }

    void reserve(const ScratchLimits& limits) override {
        grow(scores_, limits.max_heads * limits.max_context);
        grow(sums_, limits.max_heads * limits.max_head_dim);
    }

    void get_rows(const WeightMatrix& table, std::span<const std::int32_t> ids, Rows out) override {
        reference::get_rows(table, ids, out);
    }
    void matmul(ConstRows x, const WeightMatrix& w, Rows y) override { reference::matmul(x, w, y); }
    void rms_norm(ConstRows x, std::span<const float> weight, float eps, Rows y) override {
        reference::rms_norm(x, weight, eps, y);
    }
    void rope(Rows x, std::size_t first_position, const RopeParams& params) override {
        reference::rope(x, first_position, params);
    }
    void store_kv(ConstRows x, KvRows dst) override { reference::store_kv(x, dst); }
    void attention(ConstRows q, ConstKvRows keys, ConstKvRows values, std::size_t first_position,
                   const AttentionParams& params, Rows out, Rows pattern) override {
        // Scratch grows only if the caller did not reserve enough.
        grow(scores_, params.n_head * keys.rows);
        grow(sums_, params.n_head * params.head_dim);
        reference::attention(q, keys, values, first_position, params, scores_, sums_, out, pattern);
    }
    void swiglu(ConstRows gate, ConstRows up, Rows out) override { reference::swiglu(gate, up, out); }
    void geglu(ConstRows gate, ConstRows up, Rows out) override { reference::geglu(gate, up, out); }
    void gelu(ConstRows x, Rows out) override { reference::gelu(x, out); }
    void add(ConstRows a, ConstRows b, Rows out) override { reference::add(a, b, out); }
    void mul(ConstRows a, ConstRows b, Rows out) override { reference::mul(a, b, out); }
    void scale(ConstRows x, float factor, Rows out) override { reference::scale(x, factor, out); }
    void softcap(ConstRows x, float cap, Rows out) override { reference::softcap(x, cap, out); }
    void copy(ConstRows x, Rows out) override { reference::copy(x, out); }

private:
    template <class T>
    static void grow(std::vector<T>& v, std::size_t n) {
        if (v.size() < n) v.resize(n);
    }

    std::vector<float> scores_;  // [n_head, n_kv] attention probabilities
    std::vector<double> sums_;   // [n_head, head_dim] attention output accumulators
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace ember::kernels::reference
