#include "child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>

#include "common/error.hpp"

extern char** environ;

namespace ember::app {
namespace {

// The children spawn_self started and not yet reaped. This process is a subreaper (see
// spawn_self), so a process a plugin started that left its worker's process group (with
// setsid or setpgid) and outlived the worker becomes this process's child; end_orphans
// tells those apart from the workers of other runs of the same sweep by this list. The
// list is process-wide because being a subreaper is: the kernel's state, mirrored. Its
// mutex is held across a spawn, so a scan never sees a new worker before it is listed.
struct SpawnedChildren {
    std::mutex mutex;
    std::set<pid_t> live;
};

SpawnedChildren& spawned_children() {
    static SpawnedChildren children;
    return children;
}

void forget_child(pid_t pid) {
    SpawnedChildren& children = spawned_children();
    const std::lock_guard lock(children.mutex);
    children.live.erase(pid);
}

// The parent pid in /proc/PID/stat ("PID (COMM) STATE PPID ..."; COMM may hold spaces and
// parentheses, so the fields are counted from the last ')'), or -1.
pid_t parent_of(pid_t pid) {
    std::ifstream in(fmt::format("/proc/{}/stat", pid));
    std::string stat;
    std::getline(in, stat);
    const std::size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 4 >= stat.size()) return -1;
    const std::size_t begin = stat.find(' ', close + 3);  // after ") S"
    if (begin == std::string::npos) return -1;
    pid_t ppid = -1;
    std::from_chars(stat.data() + begin + 1, stat.data() + stat.size(), ppid);
    return ppid;
}

// This process's children that spawn_self did not start: orphans that came here.
std::vector<pid_t> orphan_children() {
    std::vector<pid_t> out;
    const pid_t self = ::getpid();
    SpawnedChildren& children = spawned_children();
    const std::lock_guard lock(children.mutex);
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        const std::string name = entry.path().filename().string();
        pid_t pid = 0;
        const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), pid);
        if (error != std::errc() || end != name.data() + name.size()) continue;
        if (parent_of(pid) == self && !children.live.contains(pid)) out.push_back(pid);
    }
    return out;
}

constexpr int kOrphanRounds = 64;

// Kills and reaps every orphan that came to this process, and the orphans those leave in
// turn (each round's children become the next round's), a bounded number of rounds.
void end_orphans() {
    for (int round = 0; round < kOrphanRounds; ++round) {
        const std::vector<pid_t> orphans = orphan_children();
        if (orphans.empty()) return;
        for (const pid_t pid : orphans) {
            ::kill(-pid, SIGKILL);  // the group it may lead (setsid, setpgid), then itself
            ::kill(pid, SIGKILL);
        }
        for (const pid_t pid : orphans) {
            while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
            }
        }
    }
}

}  // namespace

pid_t spawn_self(const std::vector<std::string>& args, const std::vector<ChildFd>& fds, std::optional<int> stdout_fd) {
    // Copies above every target first, so that no dup2 of the file actions overwrites a
    // descriptor a later action still reads.
    std::vector<int> copies;
    const auto close_copies = [&] {
        for (int fd : copies) ::close(fd);
    };
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    int error = 0;
    const auto give = [&](int fd, int target) {
        const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 64);
        if (copy < 0) {
            error = errno;
            return;
        }
        copies.push_back(copy);
        if (error == 0) error = posix_spawn_file_actions_adddup2(&actions, copy, target);
    };
    for (const ChildFd& f : fds) give(f.fd, f.target);
    if (stdout_fd) give(*stdout_fd, STDOUT_FILENO);

    std::vector<std::string> argv_strings{"/proc/self/exe"};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_strings) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    if (error == 0) error = posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    if (error == 0) error = posix_spawnattr_setpgroup(&attributes, 0);  // a group of its own, led by the child
    pid_t pid = -1;
    // Orphaned descendants of the child come to this process, not to init (end_orphans).
    static const bool subreaper [[maybe_unused]] = ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
    {
        SpawnedChildren& children = spawned_children();
        const std::lock_guard lock(children.mutex);
        if (error == 0) error = posix_spawn(&pid, "/proc/self/exe", &actions, &attributes, argv.data(), environ);
        if (error == 0) children.live.insert(pid);
    }
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    close_copies();
    if (error != 0) throw Error(fmt::format("cannot start a worker process: {}", std::strerror(error)));
    return pid;
}

std::string signal_name(int signal) {
    if (const char* abbrev = ::sigabbrev_np(signal)) return fmt::format("SIG{}", abbrev);
    return fmt::format("signal {}", signal);
}

std::string end_text(int status) {
    if (WIFSIGNALED(status)) return signal_name(WTERMSIG(status));
    if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
    return fmt::format("wait status {}", status);
}

std::pair<int, int> cloexec_pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(fmt::format("cannot create a pipe: {}", std::strerror(errno)));
    return {fds[0], fds[1]};
}

int wait_for(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) throw Error(fmt::format("cannot wait for process {}: {}", pid, std::strerror(errno)));
    }
    return status;
}

namespace {
constexpr int kGroupExitWaitMs = 2000;
}  // namespace

ProcessGroup::~ProcessGroup() {
    if (status_) return;
    signal(SIGKILL);
    try {
        finish();
    } catch (...) {
    }
}

void ProcessGroup::signal(int signal_number) const { ::kill(-pid_, signal_number); }

bool ProcessGroup::ended() const {
    if (status_) return true;
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return false;
    return info.si_pid == pid_;
}

int ProcessGroup::finish() {
    if (status_) return *status_;
    siginfo_t info{};
    while (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) != 0) {
        if (errno != EINTR) throw Error(fmt::format("cannot wait for process {}: {}", pid_, std::strerror(errno)));
    }
    signal(SIGKILL);  // what it forked and left behind
    status_ = wait_for(pid_);
    forget_child(pid_);
    // SIGKILL is delivered, not yet acted on: wait (a bounded time) until the group is
    // gone, so that no process of it still holds a descriptor (a directory's lock) once
    // this returns. Its processes are this process's children now (a subreaper's), so
    // they are reaped here, with the orphans that left the group.
    for (int waited_ms = 0; waited_ms < kGroupExitWaitMs; ++waited_ms) {
        end_orphans();
        if (::kill(-pid_, 0) != 0) break;
        ::usleep(1000);
    }
    return *status_;
}

CapturedChild run_self_captured(const std::vector<std::string>& args, int limit_ms) {
    const auto [out_r, out_w] = cloexec_pipe();
    const auto [err_r, err_w] = cloexec_pipe();
    pid_t pid = -1;
    try {
        pid = spawn_self(args, {{err_w, STDERR_FILENO}}, out_w);
    } catch (...) {
        for (int fd : {out_r, out_w, err_r, err_w}) ::close(fd);
        throw;
    }
    ProcessGroup child(pid);
    ::close(out_w);
    ::close(err_w);
    CapturedChild result;
    pollfd fds[2] = {{out_r, POLLIN, 0}, {err_r, POLLIN, 0}};
    std::string* sinks[2] = {&result.out, &result.err};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(limit_ms);
    int open = 2;
    while (open > 0) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            result.timed_out = true;
            child.signal(SIGKILL);
            break;
        }
        if (::poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || fds[i].revents == 0) continue;
            char buffer[4096];
            const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
            if (n > 0) {
                sinks[i]->append(buffer, static_cast<std::size_t>(n));
            } else if (n == 0 || errno != EINTR) {
                ::close(fds[i].fd);
                fds[i].fd = -1;
                --open;
            }
        }
    }
    for (const pollfd& p : fds)
        if (p.fd >= 0) ::close(p.fd);
    result.status = child.finish();
    return result;
}

}  // namespace ember::app
