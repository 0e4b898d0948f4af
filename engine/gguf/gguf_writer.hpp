// Writes GGUF v3 files: `ember quantize`, `ember synth`, and tests that build small or
// deliberately broken models. Metadata keeps insertion order; tensors are laid out in
// the order added, each padded to the alignment. write_file() writes to a temporary
// name and renames, so a failed write never leaves a half-written model behind. Tensor
// data can be given as bytes or as a function that produces them while the file is
// written, one tensor at a time: a multi-gigabyte model is then never whole in memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.hpp"

namespace ember::gguf {

class Writer {
public:
    explicit Writer(std::uint32_t alignment = Limits::default_alignment);

    // ---- metadata (a key may be set once; set it again and ember::Error is thrown;
    //      erase() it first to replace it) ----
    void set_string(std::string_view key, std::string_view value);
    void set_u32(std::string_view key, std::uint32_t value);
    void set_i32(std::string_view key, std::int32_t value);
    void set_u64(std::string_view key, std::uint64_t value);
    void set_f32(std::string_view key, float value);
    void set_bool(std::string_view key, bool value);
    void set_string_array(std::string_view key, std::span<const std::string_view> values);
    void set_string_array(std::string_view key, std::span<const std::string> values);
    void set_f32_array(std::string_view key, std::span<const float> values);
    void set_i32_array(std::string_view key, std::span<const std::int32_t> values);
    void set_u32_array(std::string_view key, std::span<const std::uint32_t> values);
    void set_bool_array(std::string_view key, std::span<const bool> values);
    // A value given as its raw encoding (type id + payload), for tests that need types
    // the typed setters do not make (nested arrays, odd widths).
    void set_raw(std::string_view key, ValueType type, std::span<const std::byte> payload);
    // Copies one entry of another file verbatim (key, type and value bytes).
    void copy_entry(const File& source, const MetadataEntry& entry);
    bool has(std::string_view key) const;
    void erase(std::string_view key);

    // ---- tensors ----
    // `ne` is fastest-first (ggml order); `data` must hold exactly the tensor's bytes.
    void add_tensor(std::string_view name, GgmlType type, std::span<const std::uint64_t> ne,
                    std::vector<std::byte> data);
    // Fills `out` (exactly the tensor's bytes, zeroed) when the tensor is written.
    using TensorSource = std::function<void(std::span<std::byte> out)>;
    void add_tensor(std::string_view name, GgmlType type, std::span<const std::uint64_t> ne, TensorSource source);

    std::vector<std::byte> to_bytes() const;
    void write_file(const std::filesystem::path& path) const;

private:
    // Starts a new entry (key + type id) and returns its bytes for the payload.
    std::vector<std::byte>& begin_entry(std::string_view key, ValueType type);

    struct PendingTensor {
        std::string name;
        GgmlType type;
        std::vector<std::uint64_t> ne;
        std::uint64_t bytes;
        TensorSource source;
    };
    // Magic, counts, metadata and tensor infos, padded to the alignment.
    std::vector<std::byte> header_bytes() const;
    // Calls sink(bytes) for the header, then each tensor's data and padding in order.
    void write(const std::function<void(std::span<const std::byte>)>& sink) const;

    std::uint32_t alignment_;
    struct Entry {
        std::string key;
        std::vector<std::byte> bytes;  // the whole encoded record: key, type id, value
    };
    std::vector<Entry> entries_;
    std::vector<PendingTensor> tensors_;
};

}  // namespace ember::gguf
