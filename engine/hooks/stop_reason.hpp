// Why a generation ended, as the host knows it: plugin.h's EMBER_STOP_REASON_LIST, the
// one list the ABI's codes, the C++ helper's ember::StopReason and these are expanded
// from. Each value is its ABI code; each name is what run.json, `ember generate --json`
// and the worker protocol write ("max_tokens", ...). The generation loop ends with
// MaxTokens, EndOfGeneration or Skipped; Error is what on_error passes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "ember/plugin.h"

namespace ember::hooks {

#define EMBER_HOST_STOP_(c_name, cxx_name, code, name) cxx_name = code,
enum class StopReason : std::uint32_t { EMBER_STOP_REASON_LIST(EMBER_HOST_STOP_) };
#undef EMBER_HOST_STOP_

struct StopReasonRow {
    StopReason reason;
    std::string_view name;
};
#define EMBER_HOST_STOP_ROW_(c_name, cxx_name, code, name) {StopReason::cxx_name, name},
inline constexpr StopReasonRow kStopReasons[] = {EMBER_STOP_REASON_LIST(EMBER_HOST_STOP_ROW_)};
#undef EMBER_HOST_STOP_ROW_

constexpr std::string_view stop_reason_name(StopReason reason) {
    for (const StopReasonRow& r : kStopReasons)
        if (r.reason == reason) return r.name;
    return "unknown";
}

// The reason of a name; nullopt for a name not in the list (never another reason).
constexpr std::optional<StopReason> stop_reason_from_name(std::string_view name) {
    for (const StopReasonRow& r : kStopReasons)
        if (r.name == name) return r.reason;
    return std::nullopt;
}

}  // namespace ember::hooks
