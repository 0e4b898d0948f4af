#include "models/block_scales.hpp"

#include <fmt/format.h>

#include "common/digest_cache.hpp"
#include "common/error.hpp"
#include "kernels/scale_check.hpp"
#include "kernels/weight_format.hpp"

namespace ember::models {
namespace {

// The name the digest cache remembers the check by; a change to what it checks renames it.
constexpr std::string_view kCheckName = "block-scales-finite-v1";

void check_every_tensor(const gguf::File& file) {
    for (const gguf::TensorInfo& t : file.tensors()) {
        const kernels::WeightFormat* format = kernels::find_weight_format(t.type);
        if (format == nullptr) continue;  // no kernels: refused by name if a model uses it
        if (const auto bad = kernels::find_non_finite_scale(*format, file.tensor_data(t))) {
            throw Error(fmt::format("{}: tensor '{}' ({}): block {} has a non-finite scale ({} = {}); the file is damaged",
                                    file.source(), t.name, format->name, bad->block, format->scales.names[bad->scale],
                                    kernels::non_finite_half_name(bad->bits)));
        }
    }
}

}  // namespace

void check_block_scales(const gguf::File& file) {
    const MappedFile* mapping = file.mapping();
    if (mapping != nullptr && check_passed_before(mapping->state(), kCheckName)) return;
    check_every_tensor(file);
    if (mapping == nullptr) return;
    // Remembered only if the file is still what was mapped (a write during the pass moves
    // its state; the next load checks again).
    try {
        if (file_state(mapping->path()) == mapping->state()) record_check_passed(mapping->state(), kCheckName);
    } catch (const Error&) {
    }
}

}  // namespace ember::models
