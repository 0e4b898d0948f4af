#include "gguf/gguf_writer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include "common/atomic_file.hpp"
#include "common/checked.hpp"
#include "common/error.hpp"
#include "gguf/layout.hpp"

namespace ember::gguf {
namespace {

void append_bytes(std::vector<std::byte>& out, const void* data, std::size_t n) {
    const std::size_t at = out.size();
    out.resize(at + n);
    if (n > 0) std::memcpy(out.data() + at, data, n);
}

template <class T>
void append(std::vector<std::byte>& out, const T& value) {
    append_bytes(out, &value, sizeof(T));
}

void append_string(std::vector<std::byte>& out, std::string_view s) {
    append<std::uint64_t>(out, s.size());
    append_bytes(out, s.data(), s.size());
}

}  // namespace

Writer::Writer(std::uint32_t alignment) : alignment_(alignment) {
    if (!is_power_of_two(alignment)) throw Error(fmt::format("GGUF writer: alignment {} is not a power of two", alignment));
    if (alignment != Limits::default_alignment) set_u32("general.alignment", alignment);
}

std::vector<std::byte>& Writer::begin_entry(std::string_view key, ValueType type) {
    if (has(key)) throw Error(fmt::format("GGUF writer: metadata key '{}' set twice", key));
    Entry& e = entries_.emplace_back();
    e.key = std::string(key);
    append_string(e.bytes, key);
    append(e.bytes, static_cast<std::uint32_t>(type));
    return e.bytes;
}

bool Writer::has(std::string_view key) const {
    return std::any_of(entries_.begin(), entries_.end(), [key](const Entry& e) { return e.key == key; });
}

void Writer::erase(std::string_view key) {
    std::erase_if(entries_, [key](const Entry& e) { return e.key == key; });
}

void Writer::set_string(std::string_view key, std::string_view value) {
    append_string(begin_entry(key, ValueType::STRING), value);
}
void Writer::set_u32(std::string_view key, std::uint32_t value) { append(begin_entry(key, ValueType::UINT32), value); }
void Writer::set_i32(std::string_view key, std::int32_t value) { append(begin_entry(key, ValueType::INT32), value); }
void Writer::set_u64(std::string_view key, std::uint64_t value) { append(begin_entry(key, ValueType::UINT64), value); }
void Writer::set_f32(std::string_view key, float value) { append(begin_entry(key, ValueType::FLOAT32), value); }
void Writer::set_bool(std::string_view key, bool value) {
    append(begin_entry(key, ValueType::BOOL), static_cast<std::uint8_t>(value ? 1 : 0));
}

namespace {

// The array header: element type and count.
std::vector<std::byte>& array_header(std::vector<std::byte>& out, ValueType element, std::size_t count) {
    append(out, static_cast<std::uint32_t>(element));
    append(out, static_cast<std::uint64_t>(count));
    return out;
}

}  // namespace

void Writer::set_string_array(std::string_view key, std::span<const std::string_view> values) {
    auto& out = array_header(begin_entry(key, ValueType::ARRAY), ValueType::STRING, values.size());
    for (std::string_view v : values) append_string(out, v);
}
void Writer::set_string_array(std::string_view key, std::span<const std::string> values) {
    std::vector<std::string_view> views(values.begin(), values.end());
    set_string_array(key, std::span<const std::string_view>(views));
}
void Writer::set_f32_array(std::string_view key, std::span<const float> values) {
    auto& out = array_header(begin_entry(key, ValueType::ARRAY), ValueType::FLOAT32, values.size());
    append_bytes(out, values.data(), values.size_bytes());
}
void Writer::set_i32_array(std::string_view key, std::span<const std::int32_t> values) {
    auto& out = array_header(begin_entry(key, ValueType::ARRAY), ValueType::INT32, values.size());
    append_bytes(out, values.data(), values.size_bytes());
}
void Writer::set_u32_array(std::string_view key, std::span<const std::uint32_t> values) {
    auto& out = array_header(begin_entry(key, ValueType::ARRAY), ValueType::UINT32, values.size());
    append_bytes(out, values.data(), values.size_bytes());
}
void Writer::set_bool_array(std::string_view key, std::span<const bool> values) {
    auto& out = array_header(begin_entry(key, ValueType::ARRAY), ValueType::BOOL, values.size());
    for (bool v : values) append(out, static_cast<std::uint8_t>(v ? 1 : 0));
}

void Writer::set_raw(std::string_view key, ValueType type, std::span<const std::byte> payload) {
    append_bytes(begin_entry(key, type), payload.data(), payload.size());
}

void Writer::copy_entry(const File& source, const MetadataEntry& entry) {
    if (has(entry.key)) throw Error(fmt::format("GGUF writer: metadata key '{}' set twice", entry.key));
    const auto bytes = source.bytes().subspan(entry.offset, entry.end - entry.offset);
    entries_.push_back({std::string(entry.key), std::vector<std::byte>(bytes.begin(), bytes.end())});
}

namespace {

// The bytes of a tensor of `type` and shape `ne`, or ember::Error naming it.
std::uint64_t tensor_bytes(std::string_view name, GgmlType type, std::span<const std::uint64_t> ne) {
    const auto traits = type_traits(static_cast<std::uint32_t>(type));
    if (!traits || ne.empty() || ne.size() > Limits::max_dims || ne[0] % traits->block_size != 0) {
        throw Error(fmt::format("GGUF writer: tensor '{}' has an invalid type or shape", name));
    }
    std::optional<std::uint64_t> bytes = row_bytes(type, ne[0]);
    for (std::size_t d = 1; d < ne.size() && bytes; ++d) bytes = checked_mul(*bytes, ne[d]);
    if (!bytes) throw Error(fmt::format("GGUF writer: tensor '{}' is too large", name));
    return *bytes;
}

}  // namespace

void Writer::add_tensor(std::string_view name, GgmlType type, std::span<const std::uint64_t> ne,
                        std::vector<std::byte> data) {
    const std::uint64_t expected = tensor_bytes(name, type, ne);
    if (data.size() != expected) {
        throw Error(fmt::format("GGUF writer: tensor '{}' has {} bytes of data, its shape needs {}", name, data.size(), expected));
    }
    auto held = std::make_shared<const std::vector<std::byte>>(std::move(data));
    add_tensor(name, type, ne, [held](std::span<std::byte> out) { std::memcpy(out.data(), held->data(), out.size()); });
}

void Writer::add_tensor(std::string_view name, GgmlType type, std::span<const std::uint64_t> ne, TensorSource source) {
    const std::uint64_t bytes = tensor_bytes(name, type, ne);
    tensors_.push_back({std::string(name), type, std::vector<std::uint64_t>(ne.begin(), ne.end()), bytes, std::move(source)});
}

std::vector<std::byte> Writer::header_bytes() const {
    std::vector<std::byte> out;
    append<std::uint32_t>(out, 0x46554747);  // "GGUF"
    append<std::uint32_t>(out, 3);
    append<std::int64_t>(out, static_cast<std::int64_t>(tensors_.size()));
    append<std::int64_t>(out, static_cast<std::int64_t>(entries_.size()));
    for (const Entry& e : entries_) append_bytes(out, e.bytes.data(), e.bytes.size());

    std::uint64_t offset = 0;
    for (const auto& t : tensors_) {
        append_string(out, t.name);
        append<std::uint32_t>(out, static_cast<std::uint32_t>(t.ne.size()));
        for (std::uint64_t n : t.ne) append<std::int64_t>(out, static_cast<std::int64_t>(n));
        append<std::uint32_t>(out, static_cast<std::uint32_t>(t.type));
        append<std::uint64_t>(out, offset);
        offset = *checked_align_up(offset + t.bytes, alignment_);
    }
    out.resize(*checked_align_up(out.size(), alignment_));
    return out;
}

void Writer::write(const std::function<void(std::span<const std::byte>)>& sink) const {
    sink(header_bytes());
    const std::vector<std::byte> zeros(alignment_);
    std::vector<std::byte> data;
    for (const auto& t : tensors_) {
        data.assign(t.bytes, std::byte{0});
        t.source(data);
        sink(data);
        sink(std::span<const std::byte>(zeros).first(*checked_align_up(t.bytes, alignment_) - t.bytes));
    }
}

std::vector<std::byte> Writer::to_bytes() const {
    std::vector<std::byte> out;
    write([&](std::span<const std::byte> bytes) { append_bytes(out, bytes.data(), bytes.size()); });
    return out;
}

void Writer::write_file(const std::filesystem::path& path) const {
    AtomicFile out(path);  // removes its temporary if anything below throws
    write([&](std::span<const std::byte> bytes) { out.write(bytes); });
    out.commit();
}

}  // namespace ember::gguf
