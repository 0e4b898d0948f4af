#include "common/output_path.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "common/error.hpp"

namespace ember {
namespace {

// lstat's answer: false when nothing is there; throws when the path cannot be examined.
bool examine(const std::filesystem::path& path, struct stat& st) {
    if (::lstat(path.c_str(), &st) == 0) return true;
    if (errno == ENOENT) return false;
    // ENOTDIR (a parent is a file), EACCES, ELOOP: the write would fail too; say so now.
    throw Error(fmt::format("{}: cannot examine the output path ({})", path.string(), std::strerror(errno)));
}

std::string kind_of(mode_t mode) {
    if (S_ISLNK(mode)) return "a symbolic link";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

std::string named(std::string_view option, const std::filesystem::path& path) {
    return option.empty() ? path.string() : fmt::format("{} {}", option, path.string());
}

}  // namespace

std::string describe_special(const std::filesystem::path& path) {
    struct stat st {};
    if (!examine(path, st) || S_ISREG(st.st_mode)) return "";
    return kind_of(st.st_mode);
}

void check_output_file(std::string_view option, const std::filesystem::path& path, ExistingFile existing) {
    struct stat st {};
    if (path.empty()) throw Error(fmt::format("{}: an empty path is no output file", option.empty() ? "output" : option));
    if (!examine(path, st)) return;
    if (!S_ISREG(st.st_mode))
        throw Error(fmt::format("{}: exists and is {}; Ember writes only regular files it creates and never replaces "
                                "anything else (choose another path)",
                                named(option, path), kind_of(st.st_mode)));
    if (existing == ExistingFile::refuse)
        throw Error(fmt::format("{}: exists; this command does not replace an existing file (remove it or choose "
                                "another path)",
                                named(option, path)));
}

void check_output_directory(std::string_view option, const std::filesystem::path& path) {
    struct stat st {};
    if (path.empty()) return;  // the current directory
    if (!examine(path, st) || S_ISDIR(st.st_mode)) return;
    const std::string hint = S_ISLNK(st.st_mode) ? " (give the directory it points to)" : "";
    throw Error(fmt::format("{}: exists and is {}, not a directory Ember may write a run into{}", named(option, path),
                            kind_of(st.st_mode), hint));
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
    struct stat sa {}, sb {};
    return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

bool is_within(const std::filesystem::path& inner, const std::filesystem::path& outer) {
    std::error_code ec;
    const std::filesystem::path a = std::filesystem::weakly_canonical(std::filesystem::absolute(inner), ec);
    if (ec) return false;
    const std::filesystem::path b = std::filesystem::weakly_canonical(std::filesystem::absolute(outer), ec);
    if (ec) return false;
    // Component by component; a trailing "" (a path ending in '/') matches anything.
    auto ia = a.begin();
    for (auto ib = b.begin(); ib != b.end(); ++ib, ++ia) {
        if (ib->empty()) break;
        if (ia == a.end() || *ia != *ib) return false;
    }
    return true;
}

}  // namespace ember
