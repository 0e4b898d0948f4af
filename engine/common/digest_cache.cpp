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
#include <sstream>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/sha256.hpp"

namespace ember {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kCompactAfterLines = 4096;

// The identity and state a digest is valid for.
std::string state_key(const struct stat& st) {
    const auto ns = [](const timespec& t) { return static_cast<long long>(t.tv_sec) * 1000000000LL + t.tv_nsec; };
    return fmt::format("{} {} {} {} {}", static_cast<unsigned long long>(st.st_dev),
                       static_cast<unsigned long long>(st.st_ino), static_cast<long long>(st.st_size), ns(st.st_mtim),
                       ns(st.st_ctim));
}

struct stat stat_of(const fs::path& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        throw Error(fmt::format("{}: cannot read ({})", path.string(), std::strerror(errno)));
    if (!S_ISREG(st.st_mode)) throw Error(fmt::format("{}: not a regular file", path.string()));
    return st;
}

// key -> digest, the last line for a key winning; `lines` counts the lines read.
std::map<std::string, std::string> read_cache(const fs::path& cache, std::size_t& lines) {
    std::map<std::string, std::string> entries;
    std::ifstream in(cache);
    lines = 0;
    for (std::string line; std::getline(in, line);) {
        ++lines;
        std::istringstream fields(line);
        std::string version, dev, ino, size, mtime, ctime, digest;
        if (!(fields >> version >> dev >> ino >> size >> mtime >> ctime >> digest) || version != "v1" ||
            digest.size() != 64)
            continue;
        entries[fmt::format("{} {} {} {} {}", dev, ino, size, mtime, ctime)] = digest;
    }
    return entries;
}

void append_entry(const fs::path& cache, const std::string& key, const std::string& digest) {
    std::error_code ec;
    fs::create_directories(cache.parent_path(), ec);
    const int fd = ::open(cache.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return;
    const std::string line = fmt::format("v1 {} {}\n", key, digest);
    [[maybe_unused]] const auto written = ::write(fd, line.data(), line.size());
    ::close(fd);
}

// Rewrites the cache with one line a key, under an exclusive lock so two compactions
// never interleave (appends racing a compaction may be lost: they are only a cache).
void compact(const fs::path& cache) {
    const int fd = ::open(cache.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
        std::size_t lines = 0;
        std::string text;
        for (const auto& [key, digest] : read_cache(cache, lines)) text += fmt::format("v1 {} {}\n", key, digest);
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

std::string cached_sha256_file_hex(const fs::path& path) {
    const std::optional<fs::path> cache = digest_cache_path();
    for (int attempt = 0; attempt < 3; ++attempt) {
        const std::string before = state_key(stat_of(path));
        std::size_t lines = 0;
        if (cache) {
            const auto entries = read_cache(*cache, lines);
            if (const auto it = entries.find(before); it != entries.end()) return it->second;
        }
        const std::string digest = sha256_file_hex(path);
        if (state_key(stat_of(path)) != before) continue;  // changed while hashed
        if (cache) {
            append_entry(*cache, before, digest);
            if (lines + 1 > kCompactAfterLines) compact(*cache);
        }
        return digest;
    }
    throw Error(fmt::format("{}: the file kept changing while it was hashed", path.string()));
}

}  // namespace ember
