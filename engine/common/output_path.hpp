// What may stand where Ember is about to write. Every file Ember writes is one it creates
// (AtomicFile: a temporary renamed into place), so an output path must name either
// nothing yet or something Ember may replace:
//   - an output file: nothing, or a regular file (replaced only where the command says so);
//     a symbolic link, a directory, a device, a FIFO or a socket is refused by name, so
//     `--trace /dev/null` never replaces the machine's /dev/null;
//   - an output directory: nothing, or a real directory (not a symbolic link to one: a
//     run replaced with --overwrite is swapped in by rename, which would replace the link).
// Commands call these up front, with the option that named the path, before any work;
// AtomicFile checks again when it creates its temporary and when it renames.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace ember {

enum class ExistingFile {
    replace,  // a regular file already there is replaced (the command documents it)
    refuse,   // anything already there is refused
};

// What stands at `path` when it is not a regular file or a directory, without following a
// final symbolic link: "a symbolic link", "a FIFO", "a character device", "a block device",
// "a socket"; "a directory" for a directory; "" for a regular file or nothing.
std::string describe_special(const std::filesystem::path& path);

// ember::Error "OPTION PATH: exists and is a FIFO; ..." (OPTION may be empty) unless
// `path` names nothing or, with ExistingFile::replace, a regular file.
void check_output_file(std::string_view option, const std::filesystem::path& path,
                       ExistingFile existing = ExistingFile::replace);

// ember::Error unless `path` names nothing or a directory that is not a symbolic link.
void check_output_directory(std::string_view option, const std::filesystem::path& path);

// Whether `a` and `b` name the same existing file or directory (device and inode).
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

// Whether `inner` is `outer` or lies anywhere beneath it, after resolving the symbolic
// links of the parts of both that exist (std::filesystem::weakly_canonical).
bool is_within(const std::filesystem::path& inner, const std::filesystem::path& outer);

}  // namespace ember
