// Shards: the K-th of N deterministic slices of an ordered list (a sweep's runs, a
// dataset run's batches of samples). K counts from 0 (Slurm's $SLURM_ARRAY_TASK_ID with
// --array=0-(N-1)). Shard K of the M items holds [floor(K*M/N), floor((K+1)*M/N)):
// contiguous, in order, sizes differing by at most one, every item in exactly one shard,
// and the same on every machine, since M and the order come from the files alone.
// Joining the shards in K order gives the list back (docs/sweep.md, "Shards").
#pragma once

#include <charconv>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace ember::config {

struct Shard {
    std::size_t index = 0;
    std::size_t count = 1;
    bool operator==(const Shard&) const = default;
};

inline constexpr std::size_t kMaxShards = 100000;

// "K/N" with 0 <= K < N <= kMaxShards; nullopt otherwise.
inline std::optional<Shard> parse_shard(std::string_view text) {
    const auto whole = [](std::string_view part, std::size_t& out) {
        const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
        return !part.empty() && ec == std::errc() && end == part.data() + part.size();
    };
    const std::size_t slash = text.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    Shard s;
    if (!whole(text.substr(0, slash), s.index) || !whole(text.substr(slash + 1), s.count)) return std::nullopt;
    if (s.count == 0 || s.count > kMaxShards || s.index >= s.count) return std::nullopt;
    return s;
}

inline std::string shard_text(Shard s) { return std::to_string(s.index) + "/" + std::to_string(s.count); }

// The items of `shard` among `total`: [first, second).
inline std::pair<std::size_t, std::size_t> shard_range(std::size_t total, Shard shard) {
    return {total * shard.index / shard.count, total * (shard.index + 1) / shard.count};
}

}  // namespace ember::config
