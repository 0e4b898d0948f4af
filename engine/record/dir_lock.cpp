#include "record/dir_lock.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "common/atomic_file.hpp"

namespace ember {
namespace {

std::string read_record(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    return text;
}

}  // namespace

DirectoryLock::DirectoryLock(const std::filesystem::path& dir, const std::string& holder) : dir_(dir) {
    fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ < 0) throw Error(fmt::format("{}: cannot open the output directory ({})", dir.string(), std::strerror(errno)));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        ::close(fd_);
        fd_ = -1;
        if (err != EWOULDBLOCK)
            throw Error(fmt::format("{}: cannot lock the output directory ({})", dir.string(), std::strerror(err)));
        const std::string record = read_record(dir / kLockRecordName);
        throw DirectoryInUse(fmt::format("{}: the output directory is in use by another ember process ({})",
                                         dir.string(), record.empty() ? "it is starting or finishing and names no run" : record));
    }
    const std::filesystem::path record = dir / kLockRecordName;
    record_on_signal_ = std::make_unique<RemoveOnSignal>(record);
    try {
        write_file_atomically(record, fmt::format("pid {}, {}\n", ::getpid(), holder));
    } catch (const Error&) {
        // A full disk: the lock holds all the same, only a rival's message is poorer.
    }
}

void DirectoryLock::remove_record() noexcept {
    std::error_code ec;
    std::filesystem::remove(dir_ / kLockRecordName, ec);
    record_on_signal_.reset();
}

DirectoryLock::~DirectoryLock() {
    if (fd_ < 0) return;
    remove_record();
    ::close(fd_);
}

}  // namespace ember
