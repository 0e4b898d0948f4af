// A read-only memory mapping of a whole file. Tensors are views into it (no copy);
// the mapping lives as long as the object, which is move-only.
//
// A file truncated while it is mapped makes reading its lost pages raise SIGBUS, which
// would kill the process with no record. Every mapping is therefore registered with a
// SIGBUS handler (installed once, chaining to any previous one): a fault inside a
// registered mapping replaces the pages from the faulting one to the mapping's end with
// zeros, marks the mapping truncated and lets the reading instruction run again; the run
// goes on and is refused at its end by truncated() (record/inputs_record.hpp,
// check_inputs_unchanged), naming the file. Nothing is added to the reading code: the
// kernels read the mapping as before. A fault outside every mapping keeps its default
// action. The registry is the one global mutable state here, because a signal handler
// can reach nothing else: a fixed table of address ranges, lock-free.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

#include "common/file_state.hpp"

namespace ember {

class MappedFile {
public:
    // Throws ember::Error naming the path when the file cannot be opened or mapped.
    explicit MappedFile(const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    std::span<const std::byte> bytes() const { return {data_, size_}; }
    std::size_t size() const { return size_; }
    const std::filesystem::path& path() const { return path_; }
    // The file's state when it was mapped (common/file_state.hpp): what a digest or a
    // check of these bytes is recorded under, and what "unchanged since" compares with.
    const FileState& state() const { return state_; }

    // Whether a read of the mapping found its file shorter than when it was mapped (a
    // SIGBUS absorbed as above), and the offset of the first such read.
    bool truncated() const;
    std::size_t truncated_at() const;

private:
    void unregister();

    std::filesystem::path path_;
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    FileState state_;
    int slot_ = -1;  // its entry in the SIGBUS handler's table, or -1
};

}  // namespace ember
