// A read-only memory mapping of a whole file. Tensors are views into it (no copy);
// the mapping lives as long as the object, which is move-only.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace ember {

class MappedFile {
public:
    // Throws ember::Error naming the path when the file cannot be opened or mapped.
    explicit MappedFile(const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    std::span<const std::byte> bytes() const { return {data_, size_}; }
    std::size_t size() const { return size_; }
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace ember
