// ChildProcess: the one way this project starts, waits for and kills a child process (the sandbox,
// compilers, redis-server, the KernelBench harness, and the coordinator and workers of
// `autokernel run`). Nothing else calls fork, exec or posix_spawn.
//
// spawn() forks and, in the child, applies SpawnOptions in a fixed order (see "In the child"
// below) and execs; it returns only once the exec has succeeded or failed, so a missing program,
// a bad working directory or any other failure between fork and exec is a Status naming the step
// and errno, not a silent exit 127. The child's stdout can be captured line by line for readiness
// handshakes ("READY {...}" lines), so nobody sleeps waiting for a child to come up.
//
// Ownership: one ChildProcess owns one child and the parent's ends of its pipes. Not thread-safe;
// one owner (a thread that only needs to kill the child's group may use kill_process_group with
// the pid). The destructor kills (SIGKILL) and reaps a child that is still running.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace ak {

// How a child is confined (issue 19, "Candidates confined"): step 7 of "In the child" below, in
// this order, each step only when its field asks for it:
//   a. cgroups: the child writes its pid into <dir>/cgroup.procs of each of `cgroups` (groups the
//      caller made, common/confine.h CgroupJob), while it still has the rights to;
//   b. with user_namespace and a root parent: it first becomes unprivileged_uid/gid (supplementary
//      groups emptied), so that the namespace's one mapped uid is not root's;
//   c. unshare of the namespaces asked for; with user_namespace the child maps its single outer
//      uid and gid to themselves (setgroups denied), so it keeps no capability once it execs;
//   d. with pid_namespace: two more forks. The child that spawn() returns stays outside; its child
//      is pid 1 of the new namespace, a minimal init (reaps orphans, forwards signals) whose child
//      execs the program (pid 2: the namespace's init would ignore signals it has no handler
//      for). SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1/2 to the outer child reach the program; the
//      outer child ends as the program ended (same exit code or signal); SIGKILL to it kills the
//      init (its death signal), and with it everything in the namespace;
//   e. mounts (mount_namespace): / becomes private (MS_REC|MS_PRIVATE); `hidden` get an empty
//      read-only tmpfs (directories) or /dev/null (files); `private_dirs` a fresh writable tmpfs
//      (mode 1777, private_dir_size_mb); `binds` are mounted at their targets (sources resolved
//      before anything was hidden; targets created in a private dir where missing); a fresh /proc
//      (fresh_proc, needs pid_namespace); / remounted read-only (read_only_root);
//   f. drop_capabilities: the bounding and ambient sets are cleared;
//   g. without user_namespace and with a root parent: setgroups(0), setresgid, setresuid to
//      unprivileged_uid/gid (which empties the capability sets);
//   h. drop_capabilities: capset to empty;
//   i. no_new_privs (also whenever a seccomp filter is given): PR_SET_NO_NEW_PRIVS;
//   j. seccomp_bpf: the filter is loaded last, so it may forbid the calls above.
// Everything that allocates is prepared in the parent; the child makes only async-signal-safe
// calls. A failure is reported like a failed exec: spawn() returns kUnavailable "cannot confine the
// child (<which call>) for '<argv[0]>': <errno text>". Which of these the kernel allows is probed
// at worker start (common/confine.h, probe_confinement); a field set here is always applied.
// The default (nothing set) applies nothing.
struct Confinement {
  struct Bind {
    std::string source;  // a file or directory of the parent's view
    std::string target;  // where the child sees it
    bool read_only = true;
  };
  std::vector<std::string> cgroups;
  // The user a root parent's child becomes (b or g); a child of a non-root parent keeps its uid.
  bool drop_root = false;
  uint32_t unprivileged_uid = 65534;
  uint32_t unprivileged_gid = 65534;
  bool user_namespace = false;
  bool mount_namespace = false;
  bool network_namespace = false;
  bool pid_namespace = false;
  bool ipc_namespace = false;
  bool uts_namespace = false;
  // Mounts: only with mount_namespace. Paths that do not exist in the parent are left out.
  std::vector<std::string> hidden;
  std::vector<std::string> private_dirs;
  int64_t private_dir_size_mb = 1024;
  std::vector<Bind> binds;
  bool fresh_proc = false;
  bool read_only_root = false;
  bool drop_capabilities = false;
  bool no_new_privs = false;
  // A classic BPF program as an array of struct sock_filter (8 bytes each), built in the parent
  // (common/confine.h, candidate_seccomp_filter); empty: no filter.
  std::vector<unsigned char> seccomp_bpf;

  // True when any field asks for something.
  bool any() const;
  // The fields in one line, for logs: "uid 65534, user+mount+net+pid namespaces, seccomp, ...".
  std::string describe() const;
};

// How to start a child. The defaults give a child that shares this process's environment, working
// directory, stdin, stdout and stderr, and dies with the thread that started it.
//
// In the child, between fork and exec, in this order (only async-signal-safe calls):
//   1. signals: the mask is emptied and every disposition set to default (reset_signals);
//   2. death signal: PR_SET_PDEATHSIG(death_signal); a parent already gone ends the child;
//   3. process group: the child leads a new one (new_process_group);
//   4. stdio: stdin from the pipe or /dev/null, stdout to the pipe or output_path, stderr to
//      output_path;
//   5. working directory: chdir(working_dir);
//   6. descriptors: every descriptor above 2 is closed at exec (close_other_fds);
//   7. confinement (see Confinement above);
//   8. exec of argv[0] (searched on this process's PATH when it has no '/'; a file without "#!"
//      runs under /bin/sh, as with execvp) with the environment built in the parent (inherit_env,
//      keep_env, env).
// A failure in steps 4-8 is sent to the parent through a close-on-exec pipe and spawn() returns
// kUnavailable "cannot <step> for '<argv[0]>': <errno text>".
struct SpawnOptions {
  // The first four fields keep their order: callers build Options positionally.

  // stdout is a pipe read with read_line() / wait_for_line().
  bool capture_stdout = false;
  // NAME=value entries set in the child's environment, on top of what inherit_env / keep_env
  // pass; an entry replaces an inherited variable of the same name.
  std::vector<std::string> env;
  // The child's stdout and stderr go to this file (created, or truncated unless append_output);
  // with capture_stdout only stderr does. Empty: both inherited. A file that cannot be opened is
  // spawn()'s error.
  std::string output_path;
  // The child leads a new process group, so kill_group() and kill_process_group() reach what it
  // starts in turn (compilers, build tools, a candidate's helpers), and a Ctrl-C meant for this
  // process does not reach it.
  bool new_process_group = false;

  // stdin is a pipe that write_line() feeds (a server taking requests line by line). Otherwise
  // stdin is /dev/null when null_stdin, else inherited.
  bool pipe_stdin = false;
  bool null_stdin = false;
  // output_path is opened with O_APPEND (a log kept across restarts) instead of truncated.
  bool append_output = false;
  // Permissions of a created output_path (before the umask).
  int output_file_mode = 0644;
  // Environment: everything of this process's when inherit_env; otherwise only the variables
  // named in keep_env (exact names). `env` is applied on top either way.
  bool inherit_env = true;
  std::vector<std::string> keep_env;
  // The child's working directory; empty: this process's.
  std::string working_dir;
  // Signal the child gets when the thread that spawned it ends (PR_SET_PDEATHSIG; note: the
  // thread, not the process), so it never outlives a parent that died hard. 0: none.
  int death_signal = SIGKILL;
  // Empty signal mask and default dispositions in the child, whatever the spawning thread
  // blocked or this process ignores (a worker that blocks SIGTERM for sigwait must not hand that
  // to a child it will stop with SIGTERM).
  bool reset_signals = true;
  // Descriptors above 2 that lack O_CLOEXEC (a library's sockets) are closed at exec.
  bool close_other_fds = true;
  Confinement confinement;
};

class ChildProcess {
 public:
  using Options = SpawnOptions;
  // Starts argv[0] with argv. Errors: kInvalidArgument for an empty argv; kUnavailable when the
  // pipes, output file or fork cannot be made, or the child fails before exec (see SpawnOptions).
  static Result<ChildProcess> spawn(const std::vector<std::string>& argv, const SpawnOptions& options);

  ChildProcess() = default;
  ChildProcess(ChildProcess&& o) noexcept;
  ChildProcess& operator=(ChildProcess&& o) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  // The child's pid (-1 when none was started); it stays set after the child is reaped.
  pid_t pid() const { return pid_; }
  // False once the child has exited (it is reaped then).
  bool running();
  // The raw waitpid status once the child is reaped (WIFEXITED / WIFSIGNALED on it), else nullopt.
  std::optional<int> wait_status() const { return wait_status_; }

  // Next full line of captured stdout (without '\n'); empty optional on timeout; error on EOF.
  Result<std::optional<std::string>> read_line(std::chrono::milliseconds timeout);
  // Reads lines until one starts with `prefix`; returns the rest of that line (kTimedOut when
  // none came in time; a line already read in is looked at even when the time is up).
  Result<std::string> wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout);
  // Writes `line` and a newline to the child's stdin (pipe_stdin); an error when the child has
  // closed it or is gone (SIGPIPE is blocked meanwhile).
  Status write_line(const std::string& line);
  // The parent's ends of the pipes (-1 when not piped), for a caller that frames its own protocol
  // (non-blocking I/O, line limits). They stay owned by this object.
  int stdin_fd() const { return stdin_fd_; }
  int stdout_fd() const { return stdout_fd_; }
  // Closes the parent's end of the stdin pipe: EOF for the child.
  void close_stdin();

  // Sends `sig` to the child (not its group); nothing once it is reaped.
  void signal(int sig);
  // Waits for exit; returns the exit code, or 128 + signal number.
  int wait();
  // Waits at most `timeout` / until `deadline` for exit: the exit code as wait() gives it, or
  // nullopt when the child is still running then (it is left running). Blocks on a pidfd, no
  // polling loop (kernels before 5.3: checks every 10 ms).
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  std::optional<int> wait_until(std::chrono::steady_clock::time_point deadline);
  // SIGKILL to the child's process group (new_process_group) and to the child, then reaps it;
  // returns wait()'s code. Once the child is reaped, kills what is left of its group (helpers it
  // started) and returns its code.
  int kill_group();
  // SIGTERM, wait up to `grace`, then SIGKILL (the group too, with new_process_group).
  int stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));

 private:
  void release();

  pid_t pid_ = -1;
  int pidfd_ = -1;  // readable once the child has exited; -1 on kernels without pidfd_open
  bool group_ = false;
  int stdout_fd_ = -1;
  int stdin_fd_ = -1;
  std::string buffer_;
  std::optional<int> exit_code_;
  std::optional<int> wait_status_;
};

// `sig` to the process group `pgid`, for a group this process did not spawn itself
// (a step a fork server started and announced) or from a thread that does not own the
// ChildProcess. pgid <= 1 is refused (never kill(0) or kill(-1)); false when nothing was signalled.
bool kill_process_group(pid_t pgid, int sig = SIGKILL);

// The command name and the state letter ('R', 'S', 'Z' for a zombie, ...) of process `pid`, from
// /proc/<pid>/stat; nullopt when there is no such process or /proc cannot tell.
struct ProcStat {
  std::string comm;
  char state;
};
std::optional<ProcStat> proc_stat(pid_t pid);

// Waits until process `pid`, which need not be a child of this one, has exited (a zombie counts as
// exited), or until `deadline`. True once it has gone or when there is no such process; false at
// the deadline. Where the kernel has pidfd_open this sleeps in poll() on the process's pidfd and
// wakes when it exits; on older kernels it reads /proc/<pid>/stat every 10 ms.
bool wait_for_exit(pid_t pid, std::chrono::steady_clock::time_point deadline);

// Full path of `name` found on PATH (as execvp would), `name` itself when it has a '/' and is
// executable, or "" when neither.
std::string find_executable(const std::string& name);

// Removes the entries of `root` named `<prefix><pid>-<anything>` whose process `pid` no longer
// exists: what a process killed with SIGKILL left behind (sandbox temporary folders, KernelBench
// job folders). Entries of live processes, and names that do not fit, are left alone (a reused pid
// only delays a removal). Returns how many entries were removed.
int remove_leftovers_of_dead_processes(const std::string& root, const std::string& prefix);
// The same, once per (root, prefix) in this process's life: what dead processes left cannot grow
// while this one runs, so later calls (every sandbox start, every runner) return 0 at once.
int remove_leftovers_of_dead_processes_once(const std::string& root, const std::string& prefix);

// Directory of the running executable (to find sibling binaries such as the sandbox).
std::string self_exe_dir();
std::string self_exe_path();

}  // namespace ak
