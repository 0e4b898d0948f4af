// Writing a file so that no reader ever sees half of it: the bytes go to a temporary
// name in the same directory (NAME.tmp.PID), through a 1 MiB stdio buffer, and commit()
// renames the finished file into place. An AtomicFile destroyed before commit() (an
// exception, a failed run) removes its temporary: nothing half-written is left behind.
//
//   AtomicFile out(dir / "trace.jsonl");
//   out.write(line);  ...
//   out.commit();
//
// Signals: once install_signal_cleanup() has run, SIGINT and SIGTERM remove every
// temporary being written (and every path registered with RemoveOnSignal) before the
// process dies of the signal. A process killed outright (SIGKILL, power loss) leaves its
// temporaries; remove_stale_temporaries() removes those of processes no longer alive.
#pragma once

#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string_view>

namespace ember {

// A path removed if SIGINT or SIGTERM arrives while this object lives (a temporary, a lock
// record). The registry is a fixed table (the handler may not allocate); a path that does
// not fit is simply not registered.
class RemoveOnSignal {
public:
    explicit RemoveOnSignal(const std::filesystem::path& path);
    ~RemoveOnSignal();
    RemoveOnSignal(const RemoveOnSignal&) = delete;
    RemoveOnSignal& operator=(const RemoveOnSignal&) = delete;

private:
    int slot_ = -1;
};

// Installs the SIGINT/SIGTERM handler (once per process; later calls do nothing).
void install_signal_cleanup();
// While a supervisor watches its worker (counted: a sweep runs several at once), SIGINT
// and SIGTERM are only noted: each supervisor passes the signal to its worker's process
// group, ends it with SIGKILL after a grace period and records the run as interrupted
// (app/supervised_run.cpp); the last end_deferring_signals() then acts on the noted
// signal as the handler would have (temporaries removed, the process ended by it).
void begin_deferring_signals();
void end_deferring_signals();
int deferred_signal();  // the noted signal; 0 when none arrived

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
    RemoveOnSignal on_signal_;
    std::FILE* file_ = nullptr;
    bool failed_ = false;
};

// The whole of `bytes` as `path`, atomically.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

// Whether `name` is a temporary of this scheme (NAME.tmp.PID); its PID when it is.
bool temporary_pid(std::string_view name, long& pid);

// Removes, under `dir` (recursively), every NAME.tmp.PID whose process is not alive.
// Returns how many were removed.
std::size_t remove_stale_temporaries(const std::filesystem::path& dir);

}  // namespace ember
