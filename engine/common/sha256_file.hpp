// SHA-256 for provenance: model file hashes, config hashes, checksums of every artifact.
// The hash itself (ember::Sha256, sha256_hex of text) is the plugin SDK's header-only one,
// shared with the built-in plugins; this adds bytes and files.
#pragma once

#include <ember/sha256.hpp>

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>

namespace ember {

std::string sha256_hex(std::span<const std::byte> data);
// Hashes a file by streaming it; throws ember::Error naming the path on a read failure.
std::string sha256_file_hex(const std::filesystem::path& path);

}  // namespace ember
