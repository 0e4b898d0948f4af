// Writing a file so that no reader ever sees half of it: the bytes go to a temporary
// name in the same directory (NAME.tmp.PID), through a 1 MiB stdio buffer, and commit()
// renames the finished file into place. An AtomicFile destroyed before commit() (an
// exception, a failed run) removes its temporary: nothing half-written is left behind.
//
//   AtomicFile out(dir / "trace.jsonl");
//   out.write(line);  ...
//   out.commit();
#pragma once

#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string_view>

namespace ember {

class AtomicFile {
public:
    // Creates the temporary (the directory must exist). Throws ember::Error naming it.
    explicit AtomicFile(std::filesystem::path path);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    void write(std::string_view bytes);
    void write(std::span<const std::byte> bytes);
    // Flushes, closes and renames the temporary to path(). Throws ember::Error (disk
    // full, rename refused) after removing the temporary.
    void commit();

    const std::filesystem::path& path() const { return path_; }
    const std::filesystem::path& temporary_path() const { return temp_; }

private:
    void discard() noexcept;

    std::filesystem::path path_;
    std::filesystem::path temp_;
    std::FILE* file_ = nullptr;
    bool failed_ = false;
};

// The whole of `bytes` as `path`, atomically.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

}  // namespace ember
