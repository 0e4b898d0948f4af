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

// Starts /proc/self/exe with `args` (without argv[0]) in a process group of its own (so a
// terminal's Ctrl-C reaches only this process, which passes it on, and everything the
// child forks can be ended with it: ProcessGroup); `stdout_fd`, when set, becomes the
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

// A child spawn_self started, the leader of its process group. The group ends with the
// child: finish() (and the destructor, for a caller leaving early) kills whatever is left
// of the group once the leader ended, so a process a plugin forked never outlives its
// run, writes into its sealed directory or holds its lock. One that left the group
// (setsid, setpgid, a daemon's double fork) is found too: spawn_self makes this process
// a subreaper, so such a process becomes its child when the worker ends, and finish()
// kills and reaps every child of this process that spawn_self did not start.
class ProcessGroup {
public:
    explicit ProcessGroup(pid_t leader) : pid_(leader) {}
    ~ProcessGroup();  // SIGKILL to the group and the leader reaped, unless finish() did it
    ProcessGroup(const ProcessGroup&) = delete;
    ProcessGroup& operator=(const ProcessGroup&) = delete;

    pid_t pid() const { return pid_; }
    void signal(int signal_number) const;  // to every process of the group
    // True once the leader ended (without reaping it: while it is a zombie its pid, the
    // group's id, cannot be given to another process).
    bool ended() const;
    // Waits for the leader to end, kills what is left of its group, reaps the leader: its
    // waitpid status.
    int finish();

private:
    pid_t pid_;
    std::optional<int> status_;
};

// Runs /proc/self/exe with `args` to its end and returns what it wrote; one still
// running after `limit_ms` is killed with its whole process group (timed_out).
struct CapturedChild {
    int status = 0;  // waitpid status
    bool timed_out = false;
    std::string out, err;
};
CapturedChild run_self_captured(const std::vector<std::string>& args, int limit_ms);

}  // namespace ember::app
