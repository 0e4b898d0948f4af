// Finds the byte offsets of a GGUF's fields (from a parse of the intact file) so tests
// can corrupt exactly one field at a time.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf_file.hpp"

namespace ember::test {

class FilePatcher {
public:
    explicit FilePatcher(std::vector<std::byte> original)
        : original_(original), parsed_(gguf::File::from_bytes(std::move(original), "original")) {}

    const gguf::File& parsed() const { return parsed_; }
    std::vector<std::byte> copy() const { return original_; }

    // Offsets inside the original file.
    std::uint64_t key_length_at(const std::string& key) const { return entry(key).offset; }
    std::uint64_t key_bytes_at(const std::string& key) const { return entry(key).offset + 8; }
    std::uint64_t value_type_at(const std::string& key) const { return entry(key).value.offset - 4; }
    std::uint64_t value_at(const std::string& key) const { return entry(key).value.offset; }
    std::uint64_t array_count_at(const std::string& key) const { return entry(key).value.offset + 4; }
    std::uint64_t array_elements_at(const std::string& key) const { return entry(key).value.elements_offset; }

    std::uint64_t tensor_info_at(const std::string& name) const { return tensor(name).info_offset; }
    std::uint64_t tensor_n_dims_at(const std::string& name) const { return tensor(name).info_offset + 8 + name.size(); }
    std::uint64_t tensor_ne_at(const std::string& name, int dim) const { return tensor_n_dims_at(name) + 4 + 8 * dim; }
    std::uint64_t tensor_type_at(const std::string& name) const {
        return tensor_ne_at(name, static_cast<int>(tensor(name).n_dims));
    }
    std::uint64_t tensor_offset_at(const std::string& name) const { return tensor_type_at(name) + 4; }

    const gguf::MetadataEntry& entry(const std::string& key) const {
        const auto* e = parsed_.find(key);
        if (!e) throw std::runtime_error("fixture lacks key " + key);
        return *e;
    }
    const gguf::TensorInfo& tensor(const std::string& name) const {
        const auto* t = parsed_.find_tensor(name);
        if (!t) throw std::runtime_error("fixture lacks tensor " + name);
        return *t;
    }

    template <class T>
    static void poke(std::vector<std::byte>& bytes, std::uint64_t at, T value) {
        std::memcpy(bytes.data() + at, &value, sizeof(T));
    }

private:
    std::vector<std::byte> original_;
    gguf::File parsed_;
};

}  // namespace ember::test
