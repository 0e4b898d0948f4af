#include "common/atomic_file.hpp"

#include <fmt/format.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <system_error>

#include "common/error.hpp"
#include "common/output_path.hpp"

namespace ember {

namespace {
constexpr std::size_t kBufferBytes = std::size_t{1} << 20;

// The paths SIGINT/SIGTERM remove. Process-wide by nature (a signal handler has no other
// way to find them); a slot is claimed with an atomic flag, so threads may register.
constexpr std::size_t kRemoveOnSignalSlots = 256;
constexpr std::size_t kPathBytes = 4096;
struct Slot {
    std::atomic<bool> used{false};
    std::atomic<bool> ready{false};
    char path[kPathBytes];
};
std::array<Slot, kRemoveOnSignalSlots> g_remove_on_signal;
std::atomic<int> g_deferring{0};      // supervisors watching a worker
std::atomic<int> g_deferred_signal{0};

extern "C" void remove_registered_and_reraise(int signal_number) {
    if (g_deferring.load() > 0) {
        g_deferred_signal.store(signal_number);
        return;
    }
    for (Slot& slot : g_remove_on_signal)
        if (slot.ready.load()) ::unlink(slot.path);
    ::signal(signal_number, SIG_DFL);
    ::raise(signal_number);
}

// A new file at `temp` that nobody else has: never through a symbolic link, never into
// a FIFO or device someone placed at the name. A leftover of this scheme (a regular file
// or a link from a process whose pid this one reuses) is removed first; it is a temporary,
// not anyone's file.
std::FILE* create_temporary(const std::filesystem::path& temp) {
    for (int attempt = 0; attempt < 2; ++attempt) {
        const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0) {
            if (std::FILE* file = ::fdopen(fd, "wb")) return file;
            ::close(fd);
            break;
        }
        if (errno != EEXIST || attempt > 0) break;
        if (describe_special(temp) == "a directory") break;
        if (::unlink(temp.c_str()) != 0) break;
    }
    throw Error(fmt::format("{}: cannot create ({})", temp.string(), std::strerror(errno)));
}

}  // namespace

RemoveOnSignal::RemoveOnSignal(const std::filesystem::path& path) {
    const std::string& text = path.native();
    if (text.size() + 1 > kPathBytes) return;
    for (std::size_t i = 0; i < kRemoveOnSignalSlots; ++i) {
        bool expected = false;
        if (!g_remove_on_signal[i].used.compare_exchange_strong(expected, true)) continue;
        std::memcpy(g_remove_on_signal[i].path, text.c_str(), text.size() + 1);
        g_remove_on_signal[i].ready.store(true);
        slot_ = static_cast<int>(i);
        return;
    }
}

RemoveOnSignal::~RemoveOnSignal() {
    if (slot_ < 0) return;
    g_remove_on_signal[slot_].ready.store(false);
    g_remove_on_signal[slot_].used.store(false);
}

void begin_deferring_signals() {
    install_signal_cleanup();
    g_deferring.fetch_add(1);
}

void end_deferring_signals() {
    if (g_deferring.fetch_sub(1) != 1) return;
    if (const int signal_number = g_deferred_signal.load()) remove_registered_and_reraise(signal_number);
}

int deferred_signal() { return g_deferred_signal.load(); }

void install_signal_cleanup() {
    static std::atomic<bool> installed{false};
    if (installed.exchange(true)) return;
    struct sigaction action {};
    action.sa_handler = remove_registered_and_reraise;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, nullptr);
    ::sigaction(SIGTERM, &action, nullptr);
}

AtomicFile::AtomicFile(std::filesystem::path path)
    : path_(std::move(path)), temp_(path_.string() + ".tmp." + std::to_string(::getpid())), on_signal_(temp_) {
    check_output_file("", path_);
    file_ = create_temporary(temp_);
    std::setvbuf(file_, nullptr, _IOFBF, kBufferBytes);
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() noexcept {
    if (file_ == nullptr) return;
    std::fclose(file_);
    file_ = nullptr;
    std::error_code ec;
    std::filesystem::remove(temp_, ec);
}

void AtomicFile::write(std::string_view bytes) { write(std::as_bytes(std::span(bytes.data(), bytes.size()))); }

void AtomicFile::write(std::span<const std::byte> bytes) {
    if (file_ == nullptr) throw Error(fmt::format("{}: written after commit", path_.string()));
    if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) failed_ = true;
}

void AtomicFile::commit() {
    if (file_ == nullptr) throw Error(fmt::format("{}: committed twice", path_.string()));
    const bool flushed = std::fflush(file_) == 0 && !failed_;
    const int saved_errno = errno;
    if (!flushed) {
        discard();
        throw Error(fmt::format("{}: cannot write ({})", temp_.string(), std::strerror(saved_errno)));
    }
    // fclose reports a write error too (the last buffered bytes, NFS).
    const bool closed = std::fclose(file_) == 0;
    const int close_errno = errno;
    file_ = nullptr;
    std::error_code ec;
    if (!closed) {
        std::filesystem::remove(temp_, ec);
        throw Error(fmt::format("{}: cannot write ({})", temp_.string(), std::strerror(close_errno)));
    }
    // What stands at the name now is checked again: the run took time, and rename() would
    // replace a symbolic link, a FIFO or a device as readily as a file.
    try {
        check_output_file("", path_);
    } catch (const Error&) {
        std::filesystem::remove(temp_, ec);
        throw;
    }
    std::filesystem::rename(temp_, path_, ec);
    if (ec) {
        const std::string reason = ec.message();
        std::filesystem::remove(temp_, ec);
        throw Error(fmt::format("cannot rename {} to {}: {}", temp_.string(), path_.string(), reason));
    }
}

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes) {
    AtomicFile out(path);
    out.write(bytes);
    out.commit();
}

bool temporary_pid(std::string_view name, long& pid) {
    const std::size_t at = name.rfind(".tmp.");
    if (at == std::string_view::npos || at == 0) return false;
    const std::string_view digits = name.substr(at + 5);
    if (digits.empty()) return false;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
    return ec == std::errc() && end == digits.data() + digits.size() && pid > 0;
}

std::size_t remove_stale_temporaries(const std::filesystem::path& dir) {
    std::size_t removed = 0;
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); !ec && it != std::filesystem::end(it);
         it.increment(ec)) {
        long pid = 0;
        if (it->is_directory(ec) || !temporary_pid(it->path().filename().native(), pid)) continue;
        const bool alive = pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
        if (alive) continue;
        std::error_code remove_ec;
        if (std::filesystem::remove(it->path(), remove_ec)) ++removed;
    }
    return removed;
}

}  // namespace ember
