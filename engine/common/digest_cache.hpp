// The SHA-256 of input files (models of many GB, plugins, vectors), hashed once: a small
// cache maps a file's identity and state, (device, inode, size, mtime, ctime) with
// nanosecond times, to its digest. Any change to the file changes one of them (a file
// replaced at the same path has a new inode; a write moves mtime and ctime, and ctime
// cannot be set back by a user), so a changed file is always hashed again. A file that
// changes while it is hashed is hashed again (three tries, then an error).
//
// Where it lives: $EMBER_DIGEST_CACHE when set ("off" disables it), else
// $XDG_CACHE_HOME/ember/digests.tsv, else ~/.cache/ember/digests.tsv. One line an entry,
// "v1 DEV INO SIZE MTIME_NS CTIME_NS SHA256" (a digest) or
// "c1 DEV INO SIZE MTIME_NS CTIME_NS CHECK" (a check the file passed in that state: the
// model loader's finite block scales, models/block_scales.hpp), appended with one write() so concurrent
// processes may share it; the last line for a key wins; it is compacted (rewritten
// atomically) when it grows past 4096 lines. A cache that cannot be read or written only
// costs time: the file is hashed.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "common/file_state.hpp"

namespace ember {

// The SHA-256 (hex) of the file at `path`, through the cache. ember::Error naming the
// path when it cannot be read.
std::string cached_sha256_file_hex(const std::filesystem::path& path);

// The same with the state of the file the digest is of (what a run compares at its end).
struct FileDigest {
    std::string sha256;
    FileState state;
};
FileDigest cached_file_digest(const std::filesystem::path& path);

// The digest the cache holds for a file in `state`, and the record of one computed
// elsewhere (the model loader hashes its mapping while it checks the scales in it).
std::optional<std::string> cached_digest(const FileState& state);
void record_digest(const FileState& state, const std::string& sha256);

// Whether a file in `state` passed `check` (one word: "scales-finite-v1") before, and the
// record that it did. A disabled or unreadable cache remembers nothing.
bool check_passed_before(const FileState& state, std::string_view check);
void record_check_passed(const FileState& state, std::string_view check);

// The cache file in use (nullopt: disabled, or no home directory to put it in).
std::optional<std::filesystem::path> digest_cache_path();

}  // namespace ember
