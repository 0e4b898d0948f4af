#include "kernels/kernel_names.hpp"

#include <array>
#include <string>

#include "kernels/weight_format.hpp"

namespace ember::kernels {
namespace {

constexpr std::array<std::string_view, 3> kPrefixes = {"reference.matmul", "reference.get_rows", "fast.matmul"};

// Built once, immutable afterwards.
const std::array<std::array<std::string, kWeightFormatCount>, 3>& names() {
    static const auto table = [] {
        std::array<std::array<std::string, kWeightFormatCount>, 3> t;
        for (std::size_t k = 0; k < kPrefixes.size(); ++k) {
            for (const WeightFormat& f : weight_formats()) {
                t[k][f.index] = std::string(kPrefixes[k]) + "." + std::string(f.kernel_suffix);
            }
        }
        return t;
    }();
    return table;
}

}  // namespace

std::string_view format_kernel_name(FormatKernel kernel, gguf::GgmlType type) {
    const auto k = static_cast<std::size_t>(kernel);
    const WeightFormat* f = find_weight_format(type);
    return f ? std::string_view(names()[k][f->index]) : kPrefixes[k];
}

}  // namespace ember::kernels
