// Token pieces for a terminal, shared by tokenize, detokenize and vocab.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace ember::app {

// `piece` in double quotes: printable UTF-8 as is; quotes, backslashes, control
// characters and bytes that are not valid UTF-8 escaped (\n, \x8f).
void append_escaped(fmt::memory_buffer& out, std::string_view piece);

// Writes `buffer` to stdout; ember::Error when it cannot.
void write_stdout_or_throw(const fmt::memory_buffer& buffer);

}  // namespace ember::app
