// Reading a whole input file (a prompt file, a dataset) that a user names: a regular
// file only (never /dev/zero, a FIFO or a directory) and at most max_input_bytes()
// bytes, so that a wrong path is a clear error naming it instead of a read that never
// ends or an allocation failure (docs/run-config.md, "Limits").
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace ember {

inline constexpr std::uint64_t kDefaultMaxInputBytes = 64ull << 20;  // 64 MiB

// $EMBER_MAX_INPUT_BYTES (a positive integer) or kDefaultMaxInputBytes. Throws
// ember::Error when the variable is set to anything else.
std::uint64_t max_input_bytes();

// The file's bytes. ember::Error "PATH: ..." naming `what` ("prompt file") when it does
// not exist, is not a regular file, is larger than max_input_bytes() or cannot be read.
std::string read_input_file(const std::filesystem::path& path, std::string_view what);

}  // namespace ember
