#include "common/digest_cache.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/sha256_file.hpp"

namespace ember {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kCompactAfterLines = 4096;

// What the cache holds: digests by file state ("v1 STATE SHA256" lines) and the checks a
// file in a state passed ("c1 STATE CHECK" lines).
struct CacheEntries {
    std::map<std::string, std::string> digests;  // state key -> sha256
    std::set<std::string> checks;                // "STATE CHECK"
    std::size_t lines = 0;
};

CacheEntries read_cache(const fs::path& cache) {
    CacheEntries entries;
    std::ifstream in(cache);
    for (std::string line; std::getline(in, line);) {
        ++entries.lines;
        std::istringstream fields(line);
        std::string version, dev, ino, size, mtime, ctime, value;
        if (!(fields >> version >> dev >> ino >> size >> mtime >> ctime >> value)) continue;
        const std::string key = fmt::format("{} {} {} {} {}", dev, ino, size, mtime, ctime);
        if (version == "v1" && value.size() == 64) entries.digests[key] = value;
        if (version == "c1") entries.checks.insert(key + " " + value);
    }
    return entries;
}

void append_line(const fs::path& cache, const std::string& line) {
    std::error_code ec;
    fs::create_directories(cache.parent_path(), ec);
    const int fd = ::open(cache.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return;
    [[maybe_unused]] const auto written = ::write(fd, line.data(), line.size());
    ::close(fd);
}

// Rewrites the cache with one line a key, under an exclusive lock so two compactions
// never interleave (appends racing a compaction may be lost: they are only a cache).
void compact(const fs::path& cache) {
    const int fd = ::open(cache.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
        const CacheEntries entries = read_cache(cache);
        std::string text;
        for (const auto& [key, digest] : entries.digests) text += fmt::format("v1 {} {}\n", key, digest);
        for (const std::string& check : entries.checks) text += fmt::format("c1 {}\n", check);
        try {
            write_file_atomically(cache, text);
        } catch (const Error&) {
        }
    }
    ::close(fd);
}

}  // namespace

std::optional<fs::path> digest_cache_path() {
    if (const char* env = std::getenv("EMBER_DIGEST_CACHE"); env && *env) {
        if (std::string_view(env) == "off") return std::nullopt;
        return fs::path(env);
    }
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "ember" / "digests.tsv";
    if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "ember" / "digests.tsv";
    return std::nullopt;
}

FileDigest cached_file_digest(const fs::path& path) {
    const std::optional<fs::path> cache = digest_cache_path();
    for (int attempt = 0; attempt < 3; ++attempt) {
        const FileState before = file_state(path);
        std::size_t lines = 0;
        if (cache) {
            const CacheEntries entries = read_cache(*cache);
            lines = entries.lines;
            if (const auto it = entries.digests.find(before.key()); it != entries.digests.end()) return {it->second, before};
        }
        const std::string digest = sha256_file_hex(path);
        if (file_state(path) != before) continue;  // changed while hashed
        if (cache) {
            append_line(*cache, fmt::format("v1 {} {}\n", before.key(), digest));
            if (lines + 1 > kCompactAfterLines) compact(*cache);
        }
        return {digest, before};
    }
    throw Error(fmt::format("{}: the file kept changing while it was hashed", path.string()));
}

std::string cached_sha256_file_hex(const fs::path& path) { return cached_file_digest(path).sha256; }

std::optional<std::string> cached_digest(const FileState& state) {
    const std::optional<fs::path> cache = digest_cache_path();
    if (!cache) return std::nullopt;
    const CacheEntries entries = read_cache(*cache);
    const auto it = entries.digests.find(state.key());
    if (it == entries.digests.end()) return std::nullopt;
    return it->second;
}

void record_digest(const FileState& state, const std::string& sha256) {
    const std::optional<fs::path> cache = digest_cache_path();
    if (!cache) return;
    const std::size_t lines = read_cache(*cache).lines;
    append_line(*cache, fmt::format("v1 {} {}\n", state.key(), sha256));
    if (lines + 1 > kCompactAfterLines) compact(*cache);
}

bool check_passed_before(const FileState& state, std::string_view check) {
    const std::optional<fs::path> cache = digest_cache_path();
    if (!cache) return false;
    return read_cache(*cache).checks.contains(fmt::format("{} {}", state.key(), check));
}

void record_check_passed(const FileState& state, std::string_view check) {
    if (const std::optional<fs::path> cache = digest_cache_path())
        append_line(*cache, fmt::format("c1 {} {}\n", state.key(), check));
}

}  // namespace ember
