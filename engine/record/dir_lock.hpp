// One writer per directory: an exclusive flock(2) on the directory itself, taken without
// waiting. The holder also leaves a record, DIR/.ember-lock ("pid P, run R": the run id holds its start time),
// so that a second writer's error names who holds it; the record is removed when the lock
// is released (and on SIGINT/SIGTERM). The kernel releases the lock when the holder dies,
// however it dies, so a lock is never stale; a record left by a killed holder is replaced.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "common/atomic_file.hpp"
#include "common/error.hpp"

namespace ember {

inline constexpr const char* kLockRecordName = ".ember-lock";

// Another process holds the directory; what() names it.
class DirectoryInUse : public Error {
public:
    using Error::Error;
};

class DirectoryLock {
public:
    // Locks `dir` (which must exist) for `holder` (a run id, or a description). Throws
    // DirectoryInUse naming the holder's record, or Error when the directory cannot be opened.
    DirectoryLock(const std::filesystem::path& dir, const std::string& holder);
    ~DirectoryLock();
    DirectoryLock(const DirectoryLock&) = delete;
    DirectoryLock& operator=(const DirectoryLock&) = delete;

    // Removes the record (the lock stays held until destruction): done before sealing,
    // so the record is never part of a sealed directory.
    void remove_record() noexcept;

    const std::filesystem::path& dir() const { return dir_; }

private:
    std::filesystem::path dir_;
    int fd_ = -1;
    std::unique_ptr<RemoveOnSignal> record_on_signal_;
};

}  // namespace ember
