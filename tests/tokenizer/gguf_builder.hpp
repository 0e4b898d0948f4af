// Small vocabulary-only GGUF files in memory, through gguf::Writer, so that tests can hand
// the tokenizer vocabularies that are malformed in one precise way. Chainable setters.
#pragma once

#include <cstring>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "gguf/gguf_writer.hpp"

namespace ember::test {

class GgufBuilder {
public:
    GgufBuilder& string(std::string_view key, std::string_view value) {
        writer_.set_string(key, value);
        return *this;
    }
    GgufBuilder& u32(std::string_view key, std::uint32_t value) {
        writer_.set_u32(key, value);
        return *this;
    }
    GgufBuilder& boolean(std::string_view key, bool value) {
        writer_.set_bool(key, value);
        return *this;
    }
    GgufBuilder& strings(std::string_view key, const std::vector<std::string>& values) {
        writer_.set_string_array(key, std::span<const std::string>(values));
        return *this;
    }
    GgufBuilder& i32s(std::string_view key, const std::vector<std::int32_t>& values) {
        writer_.set_i32_array(key, values);
        return *this;
    }
    GgufBuilder& u32s(std::string_view key, const std::vector<std::uint32_t>& values) {
        writer_.set_u32_array(key, values);
        return *this;
    }
    // An ARRAY of UINT8 (element type id 0), written byte by byte: the writer has no setter for it.
    GgufBuilder& u8s(std::string_view key, const std::vector<std::uint8_t>& values) {
        std::vector<std::byte> payload(4 + 8 + values.size());
        const std::uint32_t element_type = 0;
        const std::uint64_t count = values.size();
        std::memcpy(payload.data(), &element_type, 4);
        std::memcpy(payload.data() + 4, &count, 8);
        std::memcpy(payload.data() + 12, values.data(), values.size());
        writer_.set_raw(key, gguf::ValueType::ARRAY, payload);
        return *this;
    }
    GgufBuilder& f32s(std::string_view key, const std::vector<float>& values) {
        writer_.set_f32_array(key, values);
        return *this;
    }

    gguf::File build(std::string source = "test-vocab.gguf") const {
        return gguf::File::from_bytes(writer_.to_bytes(), std::move(source));
    }

private:
    gguf::Writer writer_;
};

}  // namespace ember::test
