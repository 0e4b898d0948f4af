// `ember sweep --shard K/N`: the K-th of N deterministic slices of a sweep's runs. K
// counts from 0 (Slurm's $SLURM_ARRAY_TASK_ID with --array=0-(N-1)). Shard K holds the
// runs [floor(K*M/N), floor((K+1)*M/N)) of the M runs in expansion order: contiguous (a
// shard's runs mostly share their model), sizes differing by at most one, and the same on
// every machine, since the expansion order is a function of the files alone.
#pragma once

#include <fmt/format.h>

#include <charconv>
#include <cstddef>
#include <string_view>
#include <utility>

#include "common/error.hpp"

namespace ember::app {

struct Shard {
    std::size_t index = 0;
    std::size_t count = 1;
};

inline constexpr std::size_t kMaxShards = 100000;

// "K/N" with 0 <= K < N <= kMaxShards; UsageError otherwise.
inline Shard parse_shard(std::string_view text) {
    const auto bad = [&] {
        return UsageError(fmt::format("ember sweep: --shard {} must be K/N with 0 <= K < N <= {} (K counts from 0)",
                                      text, kMaxShards));
    };
    const std::size_t slash = text.find('/');
    if (slash == std::string_view::npos) throw bad();
    Shard s;
    const auto whole = [](std::string_view part, std::size_t& out) {
        const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
        return ec == std::errc() && end == part.data() + part.size() && !part.empty();
    };
    if (!whole(text.substr(0, slash), s.index) || !whole(text.substr(slash + 1), s.count)) throw bad();
    if (s.count == 0 || s.count > kMaxShards || s.index >= s.count) throw bad();
    return s;
}

// The runs of `shard` among `total`: [first, second).
inline std::pair<std::size_t, std::size_t> shard_range(std::size_t total, Shard shard) {
    return {total * shard.index / shard.count, total * (shard.index + 1) / shard.count};
}

}  // namespace ember::app
