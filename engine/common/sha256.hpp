// SHA-256 (FIPS 180-4) for provenance: model file hashes, config hashes, checksums of
// every artifact. Incremental, so large files hash without being held twice.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace ember {

class Sha256 {
public:
    Sha256();
    void update(std::span<const std::byte> data);
    void update(std::string_view text);
    std::array<std::uint8_t, 32> finish();  // the object is spent afterwards
    std::string finish_hex();

private:
    void compress(const std::uint8_t* block);

    std::array<std::uint32_t, 8> state_;
    std::array<std::uint8_t, 64> buffer_{};
    std::size_t buffered_ = 0;
    std::uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::span<const std::byte> data);
std::string sha256_hex(std::string_view text);
// Hashes a file by streaming it; throws ember::Error naming the path on a read failure.
std::string sha256_file_hex(const std::filesystem::path& path);

}  // namespace ember
