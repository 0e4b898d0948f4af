// A parsed, validated GGUF v3 file (model-math §1). The file is memory-mapped; metadata
// strings and tensor data are views into the mapping, valid as long as the File lives.
//
// Everything read from the file is untrusted: counts, lengths, dimensions, offsets and
// types are checked against the file size and sane limits before anything is allocated,
// with overflow-checked arithmetic. Errors (ember::Error) read
//   "PATH: at byte OFFSET: what is wrong"
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/mapped_file.hpp"
#include "gguf/ggml_type.hpp"

namespace ember::gguf {

enum class ValueType : std::uint32_t {
    UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
    BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
std::string_view value_type_name(ValueType type);
bool is_integer(ValueType type);

// Limits that no real model comes near; a file beyond them is refused as hostile.
struct Limits {
    static constexpr std::uint64_t max_tensors = 1u << 20;
    static constexpr std::uint64_t max_metadata = 1u << 20;
    static constexpr std::uint64_t max_key_bytes = 65535;
    static constexpr std::uint64_t max_tensor_name_bytes = 63;  // ggml's GGML_MAX_NAME - 1
    static constexpr std::uint32_t max_dims = 4;
    static constexpr std::uint32_t max_array_depth = 8;
    static constexpr std::uint64_t max_alignment = 1u << 16;
    static constexpr std::uint32_t default_alignment = 32;
};

// One metadata value. Scalars are decoded; a string or an array is a view into the file.
struct Value {
    ValueType type = ValueType::UINT8;
    std::uint64_t offset = 0;  // file offset of the value's encoding (after the type id)
    // Scalars: integers widen into `integer` (signed types sign-extended, UINT64 above
    // INT64_MAX is kept in `uinteger`); floats into `real`; BOOL into `boolean`.
    std::int64_t integer = 0;
    std::uint64_t uinteger = 0;
    double real = 0;
    bool boolean = false;
    std::string_view string;  // STRING
    // ARRAY: element type, element count and the file offset of the first element.
    ValueType element_type = ValueType::UINT8;
    std::uint64_t count = 0;
    std::uint64_t elements_offset = 0;
};

struct MetadataEntry {
    std::string_view key;
    Value value;
    std::uint64_t offset = 0;  // where the key/value record starts
    std::uint64_t end = 0;     // one past its last byte
};

struct TensorInfo {
    std::string_view name;
    GgmlType type = GgmlType::F32;
    std::uint32_t n_dims = 0;
    std::array<std::uint64_t, 4> ne{1, 1, 1, 1};  // ne[0] is contiguous; unused dims are 1
    std::uint64_t n_elements = 0;
    std::uint64_t nbytes = 0;
    std::uint64_t offset = 0;       // relative to the data section, as stored
    std::uint64_t file_offset = 0;  // absolute position of the first byte
    std::uint64_t info_offset = 0;  // where the tensor-info record starts (for errors)
};

class Cursor;  // the bounds-checked reader of the untrusted bytes (gguf_file.cpp)

class File {
public:
    // Maps and validates a file. Throws ember::Error naming the path and byte offset.
    static File open(const std::filesystem::path& path);
    // Validates bytes already in memory (fuzzing, tests); `source` names them in errors.
    static File from_bytes(std::vector<std::byte> bytes, std::string source);

    File(File&&) noexcept;
    File& operator=(File&&) noexcept;
    ~File();

    const std::string& source() const { return source_; }  // the path, for messages
    std::uint32_t version() const { return version_; }
    std::uint64_t alignment() const { return alignment_; }
    std::uint64_t data_offset() const { return data_offset_; }
    std::uint64_t file_size() const { return bytes_.size(); }
    std::span<const std::byte> bytes() const { return bytes_; }
    // The mapping of a file opened from a path; nullptr for bytes given in memory.
    const MappedFile* mapping() const { return mapping_.get(); }

    // ---- metadata ----
    std::span<const MetadataEntry> metadata() const { return metadata_; }
    const MetadataEntry* find(std::string_view key) const;
    bool has(std::string_view key) const { return find(key) != nullptr; }

    // Typed getters: nullopt when the key is absent; ember::Error (naming key, types and
    // offset) when it is present with a type that cannot hold the requested value. Any
    // integer width is accepted for integers if the value fits; nothing is reinterpreted.
    std::optional<std::string_view> get_string(std::string_view key) const;
    std::optional<std::uint64_t> get_uint(std::string_view key) const;
    std::optional<std::uint32_t> get_u32(std::string_view key) const;
    std::optional<float> get_f32(std::string_view key) const;  // FLOAT32 or FLOAT64
    std::optional<bool> get_bool(std::string_view key) const;

    // Arrays. Element types are checked like scalars; `element_kind` names what is read.
    std::optional<std::vector<std::string_view>> get_string_array(std::string_view key) const;
    std::optional<std::vector<float>> get_f32_array(std::string_view key) const;
    std::optional<std::vector<std::int64_t>> get_int_array(std::string_view key) const;
    // A per-layer value: a scalar broadcast to n entries, or an array of exactly n
    // integers or booleans (model-math §4).
    std::optional<std::vector<std::int64_t>> get_per_layer(std::string_view key, std::size_t n) const;

    // ---- tensors ----
    std::span<const TensorInfo> tensors() const { return tensors_; }
    const TensorInfo* find_tensor(std::string_view name) const;
    std::span<const std::byte> tensor_data(const TensorInfo& tensor) const;

    // "SOURCE: at byte OFFSET: message", for errors found after parsing (wrong shapes...).
    std::string describe_error(std::uint64_t offset, std::string_view message) const;

private:
    File() = default;
    // parse() runs the steps in file order; each throws at the first bad byte.
    struct Counts {
        std::uint64_t tensors = 0;
        std::uint64_t metadata = 0;
    };
    void parse();
    Counts read_header(Cursor& in);
    void read_metadata(Cursor& in, std::uint64_t count);
    void read_alignment(Cursor& in);
    void read_tensor_infos(Cursor& in, std::uint64_t count);
    void place_tensor_data(Cursor& in);
    std::vector<std::int64_t> read_int_elements(const MetadataEntry& entry, bool allow_bool) const;
    [[noreturn]] void fail_type(const MetadataEntry& entry, std::string_view expected) const;

    std::string source_;
    std::unique_ptr<MappedFile> mapping_;
    std::vector<std::byte> owned_;
    std::span<const std::byte> bytes_;
    std::uint32_t version_ = 0;
    std::uint64_t alignment_ = Limits::default_alignment;
    std::uint64_t data_offset_ = 0;
    std::vector<MetadataEntry> metadata_;
    std::unordered_map<std::string_view, std::size_t> metadata_index_;
    std::vector<TensorInfo> tensors_;
    std::unordered_map<std::string_view, std::size_t> tensor_index_;
};

}  // namespace ember::gguf
