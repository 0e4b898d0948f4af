// Writes small GGUF v3 files in memory (metadata only, no tensors) so that tests can
// hand the tokenizer vocabularies that are malformed in one precise way.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.hpp"

namespace ember::test {

class GgufBuilder {
public:
    GgufBuilder& string(std::string_view key, std::string_view value) {
        begin(key, gguf::ValueType::STRING);
        put_string(value);
        return *this;
    }
    GgufBuilder& u32(std::string_view key, std::uint32_t value) {
        begin(key, gguf::ValueType::UINT32);
        put(value);
        return *this;
    }
    GgufBuilder& boolean(std::string_view key, bool value) {
        begin(key, gguf::ValueType::BOOL);
        put(static_cast<std::uint8_t>(value));
        return *this;
    }
    GgufBuilder& strings(std::string_view key, const std::vector<std::string>& values) {
        begin_array(key, gguf::ValueType::STRING, values.size());
        for (const auto& v : values) put_string(v);
        return *this;
    }
    GgufBuilder& i32s(std::string_view key, const std::vector<std::int32_t>& values) {
        begin_array(key, gguf::ValueType::INT32, values.size());
        for (const auto v : values) put(v);
        return *this;
    }
    GgufBuilder& u32s(std::string_view key, const std::vector<std::uint32_t>& values) {
        begin_array(key, gguf::ValueType::UINT32, values.size());
        for (const auto v : values) put(v);
        return *this;
    }
    GgufBuilder& f32s(std::string_view key, const std::vector<float>& values) {
        begin_array(key, gguf::ValueType::FLOAT32, values.size());
        for (const auto v : values) put(v);
        return *this;
    }

    gguf::File build(std::string source = "test-vocab.gguf") const {
        std::vector<std::byte> bytes;
        auto append = [&](const void* p, std::size_t n) {
            const auto* b = static_cast<const std::byte*>(p);
            bytes.insert(bytes.end(), b, b + n);
        };
        const std::uint32_t magic = 0x46554747;  // "GGUF"
        const std::uint32_t version = 3;
        const std::int64_t n_tensors = 0;
        append(&magic, 4);
        append(&version, 4);
        append(&n_tensors, 8);
        append(&count_, 8);
        append(body_.data(), body_.size());
        return gguf::File::from_bytes(std::move(bytes), std::move(source));
    }

private:
    template <typename T>
    void put(T value) {
        const auto* p = reinterpret_cast<const char*>(&value);
        body_.append(p, sizeof(T));
    }
    void put_string(std::string_view s) {
        put(static_cast<std::uint64_t>(s.size()));
        body_.append(s);
    }
    void begin(std::string_view key, gguf::ValueType type) {
        put_string(key);
        put(static_cast<std::uint32_t>(type));
        ++count_;
    }
    void begin_array(std::string_view key, gguf::ValueType element, std::size_t n) {
        begin(key, gguf::ValueType::ARRAY);
        put(static_cast<std::uint32_t>(element));
        put(static_cast<std::uint64_t>(n));
    }

    std::string body_;
    std::int64_t count_ = 0;
};

}  // namespace ember::test
