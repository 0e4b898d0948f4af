// Kernel names for traces and manifests, derived from the weight-format table:
// "<route>.<operation>.<format suffix>" ("fast.matmul.q4_k", "reference.get_rows.q6_k").
// The strings live as long as the process.
#pragma once

#include <string_view>

#include "gguf/ggml_type.hpp"

namespace ember::kernels {

enum class FormatKernel { reference_matmul, reference_get_rows, fast_matmul };

// The name of that kernel for weights of `type`; "<route>.<operation>" for a type
// without a row in the table (nothing runs it: loading refuses such weights).
std::string_view format_kernel_name(FormatKernel kernel, gguf::GgmlType type);

}  // namespace ember::kernels
