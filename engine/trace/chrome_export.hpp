// A trace journal in the Chrome trace-event format, for Perfetto (ui.perfetto.dev) and
// chrome://tracing: one complete event ("ph": "X") per operation, in journal order,
//
//   {"name":"attn_q-3","cat":"projection","ph":"X","ts":48.211,"dur":3.105,"pid":1,"tid":1,
//    "args":{"layer":3,"phase":"prefill","step":0,"kernel":"reference.matmul.q8_0",...}}
//
// timestamps and durations in microseconds (the format's unit) from the journal's
// nanoseconds; a layer's operations are named NAME-LAYER as llama.cpp names graph nodes.
// The output is written atomically.
#pragma once

#include <cstddef>
#include <filesystem>

namespace ember::trace {

// Returns the number of events written. Throws ember::Error naming the journal's line
// for malformed input, or the output path when it cannot be written.
std::size_t export_chrome_trace(const std::filesystem::path& journal, const std::filesystem::path& out);

}  // namespace ember::trace
