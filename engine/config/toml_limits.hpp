// Reading a TOML file within limits the TOML library itself does not keep: toml++
// parses nesting by recursion, so a dotted key 40,000 levels deep overflows the stack.
// Before toml++ sees the text, the file must be a regular file of at most
// kMaxTomlBytes, and no key, table header, array or inline table may nest deeper than
// kMaxTomlDepth levels (all of them counted together). Errors name the file, and the
// line and column where the limit was passed (docs/run-config.md, "Limits").
#pragma once

#include <toml++/toml.h>

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace ember::config {

inline constexpr std::size_t kMaxTomlBytes = 16u << 20;  // 16 MiB
inline constexpr std::size_t kMaxTomlDepth = 64;

// Throws ember::Error "FILE:LINE:COLUMN: ..." when `text` nests deeper than kMaxTomlDepth.
void check_toml_nesting(std::string_view text, const std::string& file);

// The parsed file; ember::Error naming it when it is missing, not a regular file, too
// large, nested too deeply or not TOML (file:line:column).
toml::table parse_toml_file_within_limits(const std::filesystem::path& file);

}  // namespace ember::config
