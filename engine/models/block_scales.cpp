#include "models/block_scales.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "common/digest_cache.hpp"
#include "common/error.hpp"
#include "common/sha256_file.hpp"
#include "kernels/scale_check.hpp"
#include "kernels/weight_format.hpp"

namespace ember::models {
namespace {

// The name the digest cache remembers the check by; a change to what it checks renames it.
constexpr std::string_view kCheckName = "block-scales-finite-v1";

// Checks `blocks`, whole blocks of tensor `t` starting at its block `first_block`.
void check_blocks(const gguf::File& file, const gguf::TensorInfo& t, const kernels::WeightFormat& format,
                  std::span<const std::byte> blocks, std::size_t first_block) {
    if (const auto bad = kernels::find_non_finite_scale(format, blocks)) {
        throw Error(fmt::format("{}: tensor '{}' ({}): block {} has a non-finite scale ({} = {}); the file is damaged",
                                file.source(), t.name, format.name, first_block + bad->block,
                                format.scales.names[bad->scale], kernels::non_finite_half_name(bad->bits)));
    }
}

void check_every_tensor(const gguf::File& file) {
    for (const gguf::TensorInfo& t : file.tensors()) {
        const kernels::WeightFormat* format = kernels::find_weight_format(t.type);
        if (format == nullptr) continue;  // no kernels: refused by name if a model uses it
        check_blocks(file, t, *format, file.tensor_data(t), 0);
    }
}

// Remembered only if the file is still what was mapped (a write during the pass moves
// its state; the next load checks again).
bool unchanged_since_mapped(const MappedFile& mapping) {
    try {
        return file_state(mapping.path()) == mapping.state();
    } catch (const Error&) {
        return false;
    }
}

// About 256 KiB of blocks: hashed, then checked while still in L2.
constexpr std::size_t kSlabBytes = std::size_t{1} << 18;

// One pass over the mapping in file order: the bytes between tensors are hashed, each
// tensor of a block format is hashed and checked a slab at a time. A tensor whose data
// overlaps one before it (a file may alias) is checked on its own and only its bytes not
// yet hashed are hashed.
std::string hash_and_check_in_one_pass(const gguf::File& file, const MappedFile& mapping) {
    const std::span<const std::byte> bytes = mapping.bytes();
    std::vector<const gguf::TensorInfo*> in_file_order;
    for (const gguf::TensorInfo& t : file.tensors()) in_file_order.push_back(&t);
    const auto offset_of = [&](const gguf::TensorInfo* t) {
        return static_cast<std::size_t>(file.tensor_data(*t).data() - bytes.data());
    };
    std::ranges::stable_sort(in_file_order, {}, offset_of);

    Sha256 hash;
    std::size_t hashed_to = 0;  // bytes [0, hashed_to) are in `hash`
    for (const gguf::TensorInfo* t : in_file_order) {
        const std::span<const std::byte> data = file.tensor_data(*t);
        const std::size_t begin = offset_of(t);
        const std::size_t end = begin + data.size();
        const kernels::WeightFormat* format = kernels::find_weight_format(t->type);
        const bool has_scales = format != nullptr && format->scales.count > 0;
        if (begin < hashed_to) {
            if (has_scales) check_blocks(file, *t, *format, data, 0);
            if (end > hashed_to) hash.update(bytes.subspan(hashed_to, end - hashed_to));
            hashed_to = std::max(hashed_to, end);
            continue;
        }
        hash.update(bytes.subspan(hashed_to, begin - hashed_to));
        if (!has_scales) {
            hash.update(data);
        } else {
            const std::size_t slab = std::max<std::size_t>(1, kSlabBytes / format->block_bytes) * format->block_bytes;
            for (std::size_t at = 0; at < data.size(); at += slab) {
                const std::span<const std::byte> piece = data.subspan(at, std::min(slab, data.size() - at));
                hash.update(piece);
                check_blocks(file, *t, *format, piece, at / format->block_bytes);
            }
        }
        hashed_to = end;
    }
    hash.update(bytes.subspan(hashed_to));
    return hash.finish_hex();
}

}  // namespace

void check_block_scales(const gguf::File& file) {
    const MappedFile* mapping = file.mapping();
    if (mapping != nullptr && check_passed_before(mapping->state(), kCheckName)) return;
    check_every_tensor(file);
    if (mapping != nullptr && unchanged_since_mapped(*mapping)) record_check_passed(mapping->state(), kCheckName);
}

std::string hash_and_check_block_scales_uncached(const gguf::File& file) {
    const MappedFile* mapping = file.mapping();
    if (mapping == nullptr) throw Error(fmt::format("{}: not a mapped file; nothing to hash", file.source()));
    return hash_and_check_in_one_pass(file, *mapping);
}

std::string hash_and_check_block_scales(const gguf::File& file) {
    const MappedFile* mapping = file.mapping();
    if (mapping == nullptr) throw Error(fmt::format("{}: not a mapped file; nothing to hash", file.source()));
    if (const std::optional<std::string> digest = cached_digest(mapping->state())) {
        check_block_scales(file);
        return *digest;
    }
    const std::string digest = hash_and_check_in_one_pass(file, *mapping);
    if (!unchanged_since_mapped(*mapping))
        throw Error(fmt::format("{}: the model file changed while it was loaded; load it again", file.source()));
    record_digest(mapping->state(), digest);
    record_check_passed(mapping->state(), kCheckName);
    return digest;
}

}  // namespace ember::models
