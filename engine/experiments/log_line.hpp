// What a plugin says, made safe to print and to record: every log line and failure
// message from plugin code passes through sanitize_plugin_text before it reaches the
// terminal or run.json (docs/plugin-guide.md, "Logging").
//   - invalid UTF-8 is replaced by U+FFFD, one per maximal invalid sequence;
//   - control characters (U+0000-U+001F, U+007F-U+009F, newlines and tabs too) are
//     written as \xNN or \u00NN, so one call is one line and no escape sequence reaches
//     the terminal;
//   - the result is cut at kMaxPluginLineBytes bytes (on a character boundary) and ends
//     with " [... N more bytes]".
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ember::experiments {

inline constexpr std::size_t kMaxPluginLineBytes = 4096;

std::string sanitize_plugin_text(std::string_view text);

}  // namespace ember::experiments
