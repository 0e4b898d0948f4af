// The safetensors container (huggingface/safetensors): an 8-byte little-endian header
// length N, N bytes of JSON naming each tensor's dtype, shape and [begin, end) byte range
// in the data that follows, and an optional "__metadata__" object of strings.
//
// Like gguf::File, SafetensorsFile maps the whole file and validates the whole header
// before anything reads a tensor: a header that is too large, not JSON, holds a key twice
// or a field of the wrong type; a dtype it does not know; a shape whose bytes disagree
// with the range; ranges that overlap, leave a hole or run past the end of the file. Every
// error reads `PATH: tensor 'KEY': what is wrong`. Tensors are views into the mapping;
// `floats` converts one to F32 (F32, F16, BF16) and refuses a NaN or infinite value by
// its index.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/mapped_file.hpp"

namespace ember::features {

// The dtypes of the format; Ember computes with the three float ones.
enum class TensorDtype { F32, F16, BF16, F64, I64, I32, I16, I8, U8, Bool };

std::string_view dtype_name(TensorDtype dtype);

struct SafetensorsTensor {
    std::string name;
    TensorDtype dtype = TensorDtype::F32;
    std::vector<std::uint64_t> shape;
    std::uint64_t elements = 0;
    std::span<const std::byte> bytes;  // into the mapping
};

class SafetensorsFile {
public:
    // Header JSON larger than this is refused before it is parsed (as safetensors does).
    static constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;

    // Maps and validates `path`. Throws ember::Error naming the path (and the key).
    static SafetensorsFile open(const std::filesystem::path& path);

    const std::filesystem::path& path() const { return file_.path(); }
    const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
    const std::map<std::string, std::string>& metadata() const { return metadata_; }

    // The tensor called `name`, or null.
    const SafetensorsTensor* find(std::string_view name) const;
    // The tensor called `name` with exactly `shape`; throws naming the file and key when
    // it is missing or shaped otherwise.
    const SafetensorsTensor& require(std::string_view name, const std::vector<std::uint64_t>& shape) const;
    // Its values as F32 (row-major, as stored). Throws naming the file, the key and the
    // element for a dtype that is not F32/F16/BF16 or a value that is NaN or infinite.
    std::vector<float> floats(const SafetensorsTensor& tensor) const;

private:
    explicit SafetensorsFile(MappedFile file) : file_(std::move(file)) {}

    MappedFile file_;
    std::vector<SafetensorsTensor> tensors_;
    std::map<std::string, std::string> metadata_;
};

// "[16384, 2304]"
std::string shape_text(const std::vector<std::uint64_t>& shape);

}  // namespace ember::features
