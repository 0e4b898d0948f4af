#include "common/file_state.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"

namespace ember {
namespace {

std::int64_t nanoseconds(const timespec& t) { return static_cast<std::int64_t>(t.tv_sec) * 1000000000LL + t.tv_nsec; }

FileState regular_state(const struct stat& st, const std::filesystem::path& path) {
    if (!S_ISREG(st.st_mode)) throw Error(fmt::format("{}: not a regular file", path.string()));
    return FileState::of(st);
}

}  // namespace

FileState FileState::of(const struct stat& st) {
    return {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
            static_cast<std::int64_t>(st.st_size), nanoseconds(st.st_mtim), nanoseconds(st.st_ctim)};
}

std::string FileState::key() const { return fmt::format("{} {} {} {} {}", device, inode, size, mtime_ns, ctime_ns); }

FileState file_state(const std::filesystem::path& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        throw Error(fmt::format("{}: cannot read ({})", path.string(), std::strerror(errno)));
    return regular_state(st, path);
}

FileState file_state(int fd, const std::filesystem::path& path_for_errors) {
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        throw Error(fmt::format("{}: cannot read ({})", path_for_errors.string(), std::strerror(errno)));
    return regular_state(st, path_for_errors);
}

}  // namespace ember
