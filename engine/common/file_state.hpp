// A file's identity and state: (device, inode, size, mtime, ctime), times in nanoseconds.
// Any write to a file moves its mtime and ctime (and ctime cannot be set back by a user);
// a file replaced at the same path has a new inode. So two equal states mean the same,
// unchanged bytes: what the digest cache keys its entries by, and what a run compares at
// its end with the state of each input when it was read (a file changed during the run).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace ember {

struct FileState {
    std::uint64_t device = 0;
    std::uint64_t inode = 0;
    std::int64_t size = 0;
    std::int64_t mtime_ns = 0;
    std::int64_t ctime_ns = 0;

    static FileState of(const struct stat& st);
    // "DEV INO SIZE MTIME_NS CTIME_NS", the digest cache's key.
    std::string key() const;
    bool operator==(const FileState&) const = default;
};

// The state of the file at `path` (a regular file), or of an open descriptor. ember::Error
// naming the path when it cannot be read or is not a regular file.
FileState file_state(const std::filesystem::path& path);
FileState file_state(int fd, const std::filesystem::path& path_for_errors);

}  // namespace ember
