// Starting this ember executable again as a child process (a supervised run's worker,
// `plugins validate`'s inspection) and saying how a child ended.
//
//   const pid_t pid = spawn_self({"run", "--worker"}, {{config_fd, 3}, {pipe_w, 4}}, 2);
//   ... int status; waitpid(pid, &status, 0); end_text(status) -> "SIGSEGV", "exit status 0"
//
// Every descriptor Ember opens is close-on-exec, so a child started by one thread of a
// sweep never holds another run's pipe (which would keep that run waiting for an end of
// file); only the descriptors named here reach the child, at the numbers named.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace ember::app {

struct ChildFd {
    int fd;      // in this process
    int target;  // its number in the child (2 for its stderr, or >= 3)
};

// Starts /proc/self/exe with `args` (without argv[0]); `stdout_fd`, when set, becomes the
// child's stdout. Throws ember::Error when the child cannot be started.
pid_t spawn_self(const std::vector<std::string>& args, const std::vector<ChildFd>& fds, std::optional<int> stdout_fd);

// "SIGSEGV" (signal 11), "SIGKILL", ... for a signal number.
std::string signal_name(int signal);

// How a waitpid status ended: "SIGSEGV" or "exit status 3".
std::string end_text(int status);

// A pipe whose both ends are close-on-exec: {read, write}. Throws ember::Error.
std::pair<int, int> cloexec_pipe();

// Waits for `pid` (retrying on EINTR); the waitpid status.
int wait_for(pid_t pid);

// Runs /proc/self/exe with `args` to its end and returns what it wrote; one still
// running after `limit_ms` is killed (timed_out).
struct CapturedChild {
    int status = 0;  // waitpid status
    bool timed_out = false;
    std::string out, err;
};
CapturedChild run_self_captured(const std::vector<std::string>& args, int limit_ms);

}  // namespace ember::app
