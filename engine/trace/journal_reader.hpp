// Reading a trace journal back (docs/formats.md, "Trace journal"): one JSON object per
// line, every field checked for presence and type. Used by the fingerprint, the Chrome
// export and the tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "trace/fingerprint.hpp"

namespace ember::trace {

struct TraceEvent {
    std::uint64_t seq = 0;
    std::string name;
    std::string op_kind;
    std::int32_t layer = -1;  // -1: null (a model-level operation)
    std::string phase;        // "prefill" | "decode"
    std::uint64_t step = 0;
    Shape input_shape{};
    Shape output_shape{};
    std::uint64_t input_bytes = 0;
    std::uint64_t output_bytes = 0;
    std::uint64_t start_ns = 0;
    std::uint64_t duration_ns = 0;
    std::uint64_t estimated_flops = 0;
    std::string route;
    std::string kernel;
    std::optional<std::string> weight_type;
    std::optional<std::string> variant;
};

// Calls `visit` with each event in file order. Throws ember::Error "FILE:LINE: ..." for a
// line that is not a JSON object with every field of the right type.
void for_each_event(const std::filesystem::path& journal, const std::function<void(const TraceEvent&)>& visit);

}  // namespace ember::trace
