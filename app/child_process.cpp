#include "child_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"

extern char** environ;

namespace ember::app {

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
    pid_t pid = -1;
    if (error == 0) error = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
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

}  // namespace ember::app
