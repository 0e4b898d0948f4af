// An owned, zero-initialized byte buffer aligned to 64 bytes (a cache line, and the
// widest vector load): what callers of the fast kernels allocate once for a workspace.
#pragma once

#include <cstddef>
#include <cstring>
#include <new>
#include <span>

namespace ember::kernels::fast {

inline constexpr std::size_t kWorkspaceAlignment = 64;

class AlignedBuffer {
public:
    AlignedBuffer() = default;
    explicit AlignedBuffer(std::size_t bytes)
        : size_(bytes),
          data_(bytes ? static_cast<std::byte*>(::operator new(round_up(bytes), std::align_val_t{kWorkspaceAlignment}))
                      : nullptr) {
        if (data_) std::memset(data_, 0, round_up(bytes));
    }
    AlignedBuffer(AlignedBuffer&& other) noexcept : size_(other.size_), data_(other.data_) {
        other.size_ = 0;
        other.data_ = nullptr;
    }
    AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
        if (this != &other) {
            release();
            size_ = other.size_;
            data_ = other.data_;
            other.size_ = 0;
            other.data_ = nullptr;
        }
        return *this;
    }
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;
    ~AlignedBuffer() { release(); }

    std::byte* data() { return data_; }
    const std::byte* data() const { return data_; }
    std::size_t size() const { return size_; }
    std::span<std::byte> span() { return {data_, size_}; }

    static constexpr std::size_t round_up(std::size_t bytes) {
        return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
    }

private:
    void release() {
        if (data_) ::operator delete(data_, std::align_val_t{kWorkspaceAlignment});
    }
    std::size_t size_ = 0;
    std::byte* data_ = nullptr;
};

}  // namespace ember::kernels::fast
