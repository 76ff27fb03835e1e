#include "common/process.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>

#include "common/sigpipe.h"

extern char** environ;

namespace ak {

namespace {

// The first line of a small file (a /proc entry), "" when it cannot be read.
std::string read_first_line(const char* path) {
  std::string out;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[256];
  const ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  if (n > 0) out.assign(buf, static_cast<size_t>(n));
  return out.substr(0, out.find('\n'));
}

int decode_wait_status(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return -1;
}

// The steps of SpawnOptions' "In the child" that can fail and are reported to the parent.
enum class ChildStep : int { kStdio = 1, kWorkingDir, kConfinement, kExec };

const char* describe(ChildStep step) {
  switch (step) {
    case ChildStep::kStdio:
      return "set up stdin, stdout and stderr";
    case ChildStep::kWorkingDir:
      return "change to the working directory";
    case ChildStep::kConfinement:
      return "confine the child";
    case ChildStep::kExec:
      return "execute";  // reported with the program's path instead
  }
  return "start";
}

// What a child that failed before exec writes to the error pipe.
struct ChildFailure {
  ChildStep step;
  int err;
  // A string literal naming the call that failed (confinement), or nullptr. The child is a fork
  // of this process, so the literal's address is the same on both sides.
  const char* what;
};

// In the child: reports the failed step to the parent and exits.
[[noreturn]] void fail_in_child(int err_fd, ChildStep step, int err, const char* what = nullptr) {
  const ChildFailure f{step, err, what};
  (void)!write(err_fd, &f, sizeof f);
  _exit(127);
}

// In the child: makes `fd` the descriptor `target`, open across exec.
bool move_fd(int fd, int target) {
  if (fd != target) return dup2(fd, target) == target;  // dup2 clears FD_CLOEXEC on the copy
  const int flags = fcntl(fd, F_GETFD);
  return flags >= 0 && fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) == 0;
}

// Confinement prepared in the parent: everything that allocates or formats, so that the child
// only makes system calls (apply_confinement).
struct PreparedConfinement {
  const Confinement* c = nullptr;
  bool active = false;
  bool root = false;             // this process runs as root (euid 0)
  std::vector<int> cgroup_fds;   // <dir>/cgroup.procs, opened for writing
  std::string uid_map, gid_map;  // "<uid> <uid> 1\n"
  int unshare_flags = 0;
  std::vector<std::string> hidden_dirs, hidden_files;
  std::vector<std::string> private_dirs;
  std::string tmpfs_options;  // for private_dirs
  struct Bind {
    std::string source, target;
    std::vector<std::string> make_dirs;  // created before the mount, in order
    bool source_is_dir = true;
    bool read_only = true;
  };
  std::vector<Bind> binds;
  unsigned long root_flags = 0;  // the locked flags of / for a read-only remount
  int cap_last = 40;
  sock_fprog prog{};

  ~PreparedConfinement() {
    for (int fd : cgroup_fds) close(fd);
  }
};

bool is_under(const std::string& path, const std::string& dir) {
  return path == dir ||
         (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && (dir == "/" || path[dir.size()] == '/'));
}

// The canonical path of an existing `p`, or "" when it does not exist.
std::string existing_canonical(const std::string& p) {
  std::error_code ec;
  auto c = std::filesystem::canonical(p, ec);
  return ec ? std::string() : c.string();
}

Status prepare_confinement(const Confinement& c, PreparedConfinement& p) {
  p.c = &c;
  p.active = c.any();
  if (!p.active) return Status::ok_status();
  p.root = geteuid() == 0;
  for (const std::string& dir : c.cgroups) {
    const std::string path = dir + "/cgroup.procs";
    const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return Status::unavailable("cannot open " + path + " to join the cgroup: " + strerror(errno));
    p.cgroup_fds.push_back(fd);
  }
  if (c.user_namespace) {
    const uint32_t uid = c.drop_root && p.root ? c.unprivileged_uid : static_cast<uint32_t>(geteuid());
    const uint32_t gid = c.drop_root && p.root ? c.unprivileged_gid : static_cast<uint32_t>(getegid());
    p.uid_map = std::to_string(uid) + " " + std::to_string(uid) + " 1\n";
    p.gid_map = std::to_string(gid) + " " + std::to_string(gid) + " 1\n";
    p.unshare_flags |= CLONE_NEWUSER;
  }
  if (c.mount_namespace) p.unshare_flags |= CLONE_NEWNS;
  if (c.network_namespace) p.unshare_flags |= CLONE_NEWNET;
  if (c.pid_namespace) p.unshare_flags |= CLONE_NEWPID;
  if (c.ipc_namespace) p.unshare_flags |= CLONE_NEWIPC;
  if (c.uts_namespace) p.unshare_flags |= CLONE_NEWUTS;
  if (!c.mount_namespace &&
      (!c.hidden.empty() || !c.private_dirs.empty() || !c.binds.empty() || c.fresh_proc || c.read_only_root))
    return Status::invalid("mounts (hidden, private_dirs, binds, fresh_proc, read_only_root) need mount_namespace");
  if (c.fresh_proc && !c.pid_namespace) return Status::invalid("a fresh /proc needs pid_namespace");
  for (const std::string& d : c.private_dirs) {
    const std::string canon = existing_canonical(d);
    if (canon.empty()) return Status::invalid("private directory " + d + " does not exist");
    p.private_dirs.push_back(canon);
  }
  auto in_private = [&](const std::string& path) {
    return std::any_of(p.private_dirs.begin(), p.private_dirs.end(),
                       [&](const std::string& d) { return is_under(path, d); });
  };
  for (const std::string& h : c.hidden) {
    const std::string canon = existing_canonical(h);
    if (canon.empty() || canon == "/" || in_private(canon)) continue;  // nothing to hide, or hidden anyway
    std::error_code ec;
    auto& list = std::filesystem::is_directory(canon, ec) ? p.hidden_dirs : p.hidden_files;
    if (std::find(list.begin(), list.end(), canon) == list.end()) list.push_back(canon);
  }
  p.tmpfs_options = "mode=1777,size=" + std::to_string(std::max<int64_t>(1, c.private_dir_size_mb)) + "m";
  // The sources are opened by the child once it has its own mount tree (a bind mount's source
  // must belong to the caller's namespace), and mounted from /proc/self/fd/<n>.
  for (size_t i = 0; i < c.binds.size(); ++i) {
    PreparedConfinement::Bind b;
    b.source = existing_canonical(c.binds[i].source);
    if (b.source.empty()) return Status::invalid("bind source " + c.binds[i].source + " does not exist");
    std::error_code ec;
    b.source_is_dir = std::filesystem::is_directory(b.source, ec);
    std::error_code tc;
    b.target = std::filesystem::weakly_canonical(c.binds[i].target, tc).string();
    if (tc) b.target = std::filesystem::path(c.binds[i].target).lexically_normal().string();
    if (b.target.empty() || b.target[0] != '/')
      return Status::invalid("bind target " + c.binds[i].target + " is not absolute");
    b.read_only = c.binds[i].read_only;
    // Parents of the target below a private or hidden directory (they do not exist in that fresh
    // tmpfs); elsewhere the target must exist already.
    auto in_fresh = [&](const std::string& d) {
      for (const auto* list : {&p.private_dirs, &p.hidden_dirs})
        for (const std::string& f : *list)
          if (is_under(d, f) && d != f) return true;
      return false;
    };
    const std::filesystem::path target(b.target);
    std::vector<std::string> chain;
    for (auto d = target.parent_path(); !d.empty() && d != d.root_path(); d = d.parent_path())
      if (in_fresh(d.string())) chain.insert(chain.begin(), d.string());
    b.make_dirs = std::move(chain);
    p.binds.push_back(std::move(b));
  }
  if (c.read_only_root) {
    struct statvfs st {};
    if (statvfs("/", &st) != 0) return Status::unavailable(std::string("cannot statvfs /: ") + strerror(errno));
    unsigned long f = MS_REMOUNT | MS_BIND | MS_RDONLY;
    if (st.f_flag & ST_NOSUID) f |= MS_NOSUID;
    if (st.f_flag & ST_NODEV) f |= MS_NODEV;
    if (st.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
    if (st.f_flag & ST_NOATIME) f |= MS_NOATIME;
    if (st.f_flag & ST_NODIRATIME) f |= MS_NODIRATIME;
    if (st.f_flag & ST_RELATIME) f |= MS_RELATIME;
    p.root_flags = f;
  }
  if (auto last = read_first_line("/proc/sys/kernel/cap_last_cap"); !last.empty()) p.cap_last = std::atoi(last.c_str());
  if (!c.seccomp_bpf.empty()) {
    if (c.seccomp_bpf.size() % sizeof(sock_filter) != 0 || c.seccomp_bpf.size() / sizeof(sock_filter) > BPF_MAXINSNS)
      return Status::invalid("the seccomp filter is not a whole number of BPF instructions (or too long)");
    p.prog.len = static_cast<unsigned short>(c.seccomp_bpf.size() / sizeof(sock_filter));
    p.prog.filter = reinterpret_cast<sock_filter*>(const_cast<unsigned char*>(c.seccomp_bpf.data()));
  }
  return Status::ok_status();
}

// In the child: `prefix` followed by the decimal digits of `v` >= 0, in `out` (64 bytes).
void format_number(char* out, const char* prefix, long v) {
  size_t n = 0;
  while (prefix[n] != 0 && n < 40) {
    out[n] = prefix[n];
    ++n;
  }
  char digits[24];
  int d = 0;
  do {
    digits[d++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0 && d < 20);
  while (d > 0) out[n++] = digits[--d];
  out[n] = 0;
}

// In the child: writes all of `text` to `path` (uid_map and friends); false with errno set.
bool write_to(const char* path, const std::string& text) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = write(fd, text.data(), text.size());
  const int err = errno;
  close(fd);
  errno = err;
  return n == static_cast<ssize_t>(text.size());
}

// Signals forwarded into a pid namespace (Confinement d), and where to: the namespace's init as
// seen from the child outside it, or the program as seen from that init.
volatile pid_t g_forward_to = 0;
void forward_signal(int sig) {
  if (g_forward_to > 0) kill(g_forward_to, sig);
}

void forward_signals_to(pid_t pid) {
  g_forward_to = pid;
  struct sigaction fwd {};
  fwd.sa_handler = forward_signal;
  sigemptyset(&fwd.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaction(sig, &fwd, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

// Closes every descriptor but `keep`: nothing of the parent's stays open in a process that does not
// exec (the pipes' EOF must follow the program).
void close_all_but(int keep) {
  if (keep > 0) close_range(0, static_cast<unsigned>(keep - 1), 0);
  close_range(static_cast<unsigned>(keep + 1), ~0U, 0);
}

// The child that stays outside the new pid namespace: forwards signals to `init`, then ends as
// the program ended (its raw wait status comes through `status_fd`; init's own when none came).
[[noreturn]] void relay_namespace_init(pid_t init, int status_fd) {
  close_all_but(status_fd);
  forward_signals_to(init);
  int st = 0;
  while (waitpid(init, &st, 0) < 0) {
    if (errno != EINTR) _exit(127);
  }
  int program = 0;
  if (read(status_fd, &program, sizeof program) == static_cast<ssize_t>(sizeof program)) st = program;
  if (WIFSIGNALED(st)) {
    const int sig = WTERMSIG(st);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    kill(getpid(), sig);
    _exit(128 + sig);
  }
  _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 127);
}

// Pid 1 of the new namespace: a minimal init that reaps orphans, forwards signals to `program`
// (the namespace's init ignores signals it has no handler for, so the program must not be pid 1),
// and when the program ends, reports its wait status through `status_fd` and exits, which ends
// everything else in the namespace.
[[noreturn]] void namespace_init(pid_t program, int status_fd) {
  close_all_but(status_fd);
  // Its memory is a copy of the parent's: nobody in the namespace may read it through /proc.
  prctl(PR_SET_DUMPABLE, 0);
  forward_signals_to(program);
  for (;;) {
    int st = 0;
    const pid_t pid = waitpid(-1, &st, 0);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) _exit(127);
    if (pid == program) {
      (void)!write(status_fd, &st, sizeof st);
      _exit(0);
    }
  }
}

// In the child, the uid/gid switch of a root parent's child (Confinement b and g): raw system
// calls, which change only the calling thread, the only one here.
bool become_unprivileged(const Confinement& c) {
  return syscall(SYS_setgroups, 0, nullptr) == 0 &&
         syscall(SYS_setresgid, c.unprivileged_gid, c.unprivileged_gid, c.unprivileged_gid) == 0 &&
         syscall(SYS_setresuid, c.unprivileged_uid, c.unprivileged_uid, c.unprivileged_uid) == 0;
}

// In the child, step 7: applies the prepared confinement; returns nullptr, or names the call that
// failed (errno set).
const char* apply_confinement(const PreparedConfinement& p) {
  if (!p.active) return nullptr;
  const Confinement& c = *p.c;
  // a. cgroups
  if (!p.cgroup_fds.empty()) {
    char pid[64];
    format_number(pid, "", getpid());
    const size_t n = strlen(pid);
    for (int fd : p.cgroup_fds)
      if (write(fd, pid, n) != static_cast<ssize_t>(n)) return "join the cgroup";
  }
  bool dropped = false;
  // b, c. namespaces
  if (c.user_namespace && c.drop_root && p.root) {
    if (!become_unprivileged(c)) return "become the unprivileged user";
    dropped = true;
    // A uid change makes /proc/self root's; the maps below are written as the new user.
    prctl(PR_SET_DUMPABLE, 1);
  }
  if (p.unshare_flags != 0 && unshare(p.unshare_flags) != 0) return "unshare the namespaces";
  if (c.user_namespace) {
    if (!write_to("/proc/self/setgroups", "deny")) return "deny setgroups in the user namespace";
    if (!write_to("/proc/self/uid_map", p.uid_map)) return "write uid_map";
    if (!write_to("/proc/self/gid_map", p.gid_map)) return "write gid_map";
  }
  // d. pid namespace: the child stays outside, its child is the namespace's init, and that one's
  // child (after the mounts below) goes on to exec
  int status_pipe[2] = {-1, -1};
  if (c.pid_namespace) {
    if (pipe2(status_pipe, O_CLOEXEC) != 0) return "make the pid namespace's status pipe";
    const pid_t init = _Fork();
    if (init < 0) return "fork into the pid namespace";
    if (init > 0) relay_namespace_init(init, status_pipe[0]);
    close(status_pipe[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
  }
  // e. mounts
  if (c.mount_namespace) {
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return "make / private";
    // At most 64 binds: their sources' descriptors live on this stack.
    int bind_fds[64];
    if (p.binds.size() > 64) {
      errno = E2BIG;
      return "open the bind sources";
    }
    for (size_t i = 0; i < p.binds.size(); ++i) {
      bind_fds[i] = open(p.binds[i].source.c_str(), O_PATH | O_CLOEXEC);
      if (bind_fds[i] < 0) return "open a bind source";
    }
    // Writable until the binds below have made their mount points in them.
    for (const std::string& d : p.hidden_dirs)
      if (mount("tmpfs", d.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=64k") != 0)
        return "hide a directory";
    for (const std::string& f : p.hidden_files)
      if (mount("/dev/null", f.c_str(), nullptr, MS_BIND, nullptr) != 0) return "hide a file";
    for (const std::string& d : p.private_dirs)
      if (mount("tmpfs", d.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, p.tmpfs_options.c_str()) != 0)
        return "mount a private tmpfs";
    for (size_t i = 0; i < p.binds.size(); ++i) {
      const auto& b = p.binds[i];
      for (const std::string& d : b.make_dirs)
        if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) return "make a bind target's directory";
      if (b.source_is_dir) {
        if (mkdir(b.target.c_str(), 0755) != 0 && errno != EEXIST) return "make a bind target";
      } else {
        const int fd = open(b.target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) close(fd);
      }
      char source[64];
      format_number(source, "/proc/self/fd/", bind_fds[i]);
      if (mount(source, b.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) return "bind a path";
      if (b.read_only && mount(nullptr, b.target.c_str(), nullptr,
                               MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0)
        return "make a bind read-only";
    }
    for (size_t i = 0; i < p.binds.size(); ++i) close(bind_fds[i]);
    for (const std::string& d : p.hidden_dirs)
      if (mount(nullptr, d.c_str(), nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
        return "make a hidden directory read-only";
    if (c.fresh_proc && mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
      return "mount a fresh /proc";
    if (c.read_only_root && mount(nullptr, "/", nullptr, p.root_flags, nullptr) != 0) return "remount / read-only";
  }
  if (c.pid_namespace) {
    const pid_t program = _Fork();
    if (program < 0) return "fork the program in the pid namespace";
    if (program > 0) namespace_init(program, status_pipe[1]);
    close(status_pipe[1]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
  }
  // f. bounding and ambient sets (a non-root child without a user namespace holds no capability
  // and may not change its bounding set: nothing to drop there)
  if (c.drop_capabilities) {
    const bool may = p.root || c.user_namespace;
    for (int cap = 0; may && cap <= p.cap_last; ++cap)
      if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return "clear the capability bounding set";
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  }
  // g. the user of a root parent's child without a user namespace
  if (c.drop_root && p.root && !dropped && !become_unprivileged(c)) return "become the unprivileged user";
  // h. capabilities
  if (c.drop_capabilities) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    if (syscall(SYS_capset, &header, data) != 0) return "drop the capabilities";
  }
  // i, j.
  if ((c.no_new_privs || p.prog.len > 0) && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return "set no_new_privs";
  if (p.prog.len > 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p.prog) != 0) return "load the seccomp filter";
  return nullptr;
}

std::string name_of(const std::string& entry) { return entry.substr(0, entry.find('=')); }

// The child's environment (SpawnOptions: inherit_env, keep_env, env), built before fork.
std::vector<std::string> child_environment(const SpawnOptions& o) {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    if (o.inherit_env || std::find(o.keep_env.begin(), o.keep_env.end(), name_of(entry)) != o.keep_env.end())
      out.push_back(std::move(entry));
  }
  for (const std::string& e : o.env) {
    const std::string name = name_of(e);
    auto it = std::find_if(out.begin(), out.end(), [&](const std::string& x) { return name_of(x) == name; });
    if (it != out.end()) {
      *it = e;
    } else {
      out.push_back(e);
    }
  }
  return out;
}

// A descriptor of the parent, closed when it goes out of scope unless released.
struct Fd {
  int fd = -1;
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  int release() { return std::exchange(fd, -1); }
};

bool make_pipe(Fd& read_end, Fd& write_end) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return false;
  read_end.fd = p[0];
  write_end.fd = p[1];
  return true;
}

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

}  // namespace

Result<ChildProcess> ChildProcess::spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (argv.empty()) return Status::invalid("spawn needs a program");
  const SpawnOptions& o = options;
  auto failed = [&](const std::string& what) {
    return Status::unavailable("cannot " + what + " for '" + argv[0] + "': " + strerror(errno));
  };
  Fd out_read, out_write, in_read, in_write, null_in, file, err_read, err_write;
  if (o.capture_stdout && !make_pipe(out_read, out_write)) return failed("make a stdout pipe");
  if (o.pipe_stdin) {
    if (!make_pipe(in_read, in_write)) return failed("make a stdin pipe");
  } else if (o.null_stdin) {
    null_in.fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_in.fd < 0) return failed("open /dev/null");
  }
  if (!o.output_path.empty()) {
    file.fd = open(o.output_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (o.append_output ? O_APPEND : O_TRUNC),
                   o.output_file_mode);
    if (file.fd < 0) return failed("open the output file " + o.output_path);
  }
  if (!make_pipe(err_read, err_write)) return failed("make a pipe");
  PreparedConfinement confinement;
  if (Status s = prepare_confinement(o.confinement, confinement); !s.ok())
    return Status(s.code(), "cannot confine '" + argv[0] + "': " + s.message());

  // Everything the child needs is built here: between fork and exec it may only make
  // async-signal-safe calls (this process has other threads).
  const bool search = argv[0].find('/') == std::string::npos;
  const std::string program = search ? find_executable(argv[0]) : argv[0];
  if (program.empty())
    return Status::unavailable("cannot execute '" + argv[0] + "': not found on PATH (" +
                               (getenv("PATH") ? getenv("PATH") : "unset") + ")");
  std::vector<std::string> env = child_environment(o);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  // A script without a "#!" line runs under /bin/sh, as execvp does it.
  std::vector<char*> sh_args = {const_cast<char*>("sh"), const_cast<char*>(program.c_str())};
  sh_args.insert(sh_args.end(), args.begin() + 1, args.end());
  const pid_t parent = getpid();

  // All signals blocked across fork, so no handler of this process runs in the child before
  // step 1 resets them.
  sigset_t all, old_mask;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old_mask);
  const pid_t pid = fork();
  if (pid == 0) {
    const int err_fd = err_write.fd;
    // 1. signals
    if (o.reset_signals) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // KILL, STOP and libc's own refuse
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
    } else {
      sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    }
    // 2. death signal
    if (o.death_signal != 0) {
      prctl(PR_SET_PDEATHSIG, o.death_signal);
      if (getppid() != parent) _exit(127);  // the parent died before the signal was armed
    }
    // 3. process group
    if (o.new_process_group) setpgid(0, 0);
    // 4. stdio
    bool stdio_ok = true;
    if (in_read.fd >= 0) stdio_ok = move_fd(in_read.fd, STDIN_FILENO);
    if (null_in.fd >= 0) stdio_ok = stdio_ok && move_fd(null_in.fd, STDIN_FILENO);
    if (out_write.fd >= 0) {
      stdio_ok = stdio_ok && move_fd(out_write.fd, STDOUT_FILENO);
    } else if (file.fd >= 0) {
      stdio_ok = stdio_ok && move_fd(file.fd, STDOUT_FILENO);
    }
    if (file.fd >= 0) stdio_ok = stdio_ok && move_fd(file.fd, STDERR_FILENO);
    if (!stdio_ok) fail_in_child(err_fd, ChildStep::kStdio, errno);
    // 5. working directory
    if (!o.working_dir.empty() && chdir(o.working_dir.c_str()) != 0)
      fail_in_child(err_fd, ChildStep::kWorkingDir, errno);
    // 6. descriptors (kernels before 5.11 refuse; what lacks O_CLOEXEC then stays open)
    if (o.close_other_fds) close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    // 7. confinement
    if (const char* what = apply_confinement(confinement)) fail_in_child(err_fd, ChildStep::kConfinement, errno, what);
    // 8. exec
    execve(program.c_str(), args.data(), envp.data());
    if (errno == ENOEXEC) {
      execve("/bin/sh", sh_args.data(), envp.data());
      errno = ENOEXEC;
    }
    fail_in_child(err_fd, ChildStep::kExec, errno);
  }
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (pid < 0) {
    errno = fork_errno;
    return failed("fork");
  }
  // The write end closes in the child at exec: EOF here means the exec succeeded.
  err_write.reset();
  ChildFailure failure{};
  ssize_t n;
  do n = read(err_read.fd, &failure, sizeof failure);
  while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof failure)) {
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {}
    if (failure.step == ChildStep::kExec)
      return Status::unavailable("cannot execute '" + program + "': " + strerror(failure.err));
    return Status::unavailable(std::string("cannot ") + describe(failure.step) +
                               (failure.step == ChildStep::kWorkingDir ? " " + o.working_dir : "") +
                               (failure.what ? std::string(" (") + failure.what + ")" : std::string()) + " for '" +
                               argv[0] + "': " + strerror(failure.err));
  }
  ChildProcess c;
  c.pid_ = pid;
  c.pidfd_ = open_pidfd(pid);
  c.group_ = o.new_process_group;
  c.stdout_fd_ = out_read.release();
  c.stdin_fd_ = in_write.release();
  return c;
}

ChildProcess::ChildProcess(ChildProcess&& o) noexcept { *this = std::move(o); }

void ChildProcess::release() {
  if (pid_ > 0 && !exit_code_) {
    ::kill(pid_, SIGKILL);
    wait();
  }
  for (int* fd : {&stdout_fd_, &stdin_fd_, &pidfd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

ChildProcess& ChildProcess::operator=(ChildProcess&& o) noexcept {
  if (this != &o) {
    release();
    pid_ = std::exchange(o.pid_, -1);
    pidfd_ = std::exchange(o.pidfd_, -1);
    group_ = std::exchange(o.group_, false);
    stdout_fd_ = std::exchange(o.stdout_fd_, -1);
    stdin_fd_ = std::exchange(o.stdin_fd_, -1);
    buffer_ = std::move(o.buffer_);
    o.buffer_.clear();
    exit_code_ = std::exchange(o.exit_code_, std::nullopt);
    wait_status_ = std::exchange(o.wait_status_, std::nullopt);
  }
  return *this;
}

ChildProcess::~ChildProcess() { release(); }

void ChildProcess::close_stdin() {
  if (stdin_fd_ >= 0) close(stdin_fd_);
  stdin_fd_ = -1;
}

Status ChildProcess::write_line(const std::string& line) {
  if (stdin_fd_ < 0) return Status::invalid("stdin of the child is not a pipe");
  const std::string data = line + "\n";
  SigpipeBlock block;  // a child that has gone is an EPIPE error here, not the end of this process
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(stdin_fd_, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::unavailable(std::string("write to the child: ") + strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  return Status::ok_status();
}

std::optional<int> ChildProcess::wait_for(std::chrono::milliseconds timeout) {
  return wait_until(std::chrono::steady_clock::now() + timeout);
}

namespace {

// Waits until a process has gone or `deadline`: in poll() on its `pidfd` while there is one
// (readable once the whole process has exited, a zombie included, whatever /proc shows), else
// asking `gone` every 10 ms (kernels before 5.3, or a poll that failed). Never false before the
// deadline (the poll timeout is rounded up), and at it after a last look.
bool wait_until_gone(int pidfd, std::chrono::steady_clock::time_point deadline, const std::function<bool()>& gone) {
  using std::chrono::steady_clock;
  for (;;) {
    const auto now = steady_clock::now();
    const auto left =
        now >= deadline ? std::chrono::milliseconds(0) : std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) pidfd = -1;  // poll itself failed: `gone` from here on
    } else {
      if (gone()) return true;
      const auto pause = std::min<std::chrono::nanoseconds>(left, std::chrono::milliseconds(10));
      const timespec ts{0, static_cast<long>(pause.count())};
      if (pause.count() > 0) nanosleep(&ts, nullptr);
    }
    if (steady_clock::now() >= deadline) {
      if (pidfd < 0) return gone();
      pollfd p{pidfd, POLLIN, 0};
      return poll(&p, 1, 0) > 0;  // an exit at the deadline itself
    }
  }
}

}  // namespace

std::optional<int> ChildProcess::wait_until(std::chrono::steady_clock::time_point deadline) {
  if (pid_ <= 0) return -1;
  if (!running()) return *exit_code_;
  wait_until_gone(pidfd_, deadline, [this] { return !running(); });
  if (running()) return std::nullopt;
  return *exit_code_;
}

std::optional<ProcStat> proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!in || !std::getline(in, stat)) return std::nullopt;
  // The command name may itself hold ')' or spaces: it ends at the last ')'.
  const size_t open = stat.find('('), close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open || close + 2 >= stat.size())
    return std::nullopt;
  return ProcStat{stat.substr(open + 1, close - open - 1), stat[close + 2]};
}

bool wait_for_exit(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  if (pid <= 0) return true;
  Fd pidfd;
  pidfd.fd = open_pidfd(pid);
  if (pidfd.fd < 0 && errno == ESRCH) return true;
  return wait_until_gone(pidfd.fd, deadline, [pid] {
    const auto s = proc_stat(pid);
    return !s || s->state == 'Z' || s->state == 'X';
  });
}

int ChildProcess::kill_group() {
  if (pid_ <= 0) return -1;
  // Once the child is reaped its group may still hold what it started: that goes too.
  if (group_ || (!exit_code_ && getpgid(pid_) == pid_)) kill_process_group(pid_, SIGKILL);
  if (exit_code_) return *exit_code_;
  ::kill(pid_, SIGKILL);
  return wait();
}

bool ChildProcess::running() {
  if (pid_ <= 0 || exit_code_) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    wait_status_ = st;
    exit_code_ = decode_wait_status(st);
    return false;
  }
  return true;
}

Result<std::optional<std::string>> ChildProcess::read_line(std::chrono::milliseconds timeout) {
  if (stdout_fd_ < 0) return Status::invalid("stdout of the child is not captured");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return std::optional<std::string>(line);
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::optional<std::string>();
    pollfd p{stdout_fd_, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(stdout_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::unavailable("child " + std::to_string(pid_) + " closed its stdout (exited?)");
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

Result<std::string> ChildProcess::wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    // A line already read in comes back even when the time is up (read_line looks at it first).
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    auto line = read_line(std::max(left, std::chrono::milliseconds(0)));
    if (!line.ok()) return line.status();
    if (!line->has_value()) break;
    if ((*line)->rfind(prefix, 0) == 0) return (*line)->substr(prefix.size());
  }
  return Status::timed_out("child " + std::to_string(pid_) + " did not print '" + prefix + "' within " +
                           std::to_string(timeout.count()) + " ms");
}

void ChildProcess::signal(int sig) {
  if (pid_ > 0 && !exit_code_) ::kill(pid_, sig);
}

int ChildProcess::wait() {
  if (exit_code_) return *exit_code_;
  if (pid_ <= 0) return -1;
  int st = 0;
  while (waitpid(pid_, &st, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  wait_status_ = st;
  exit_code_ = decode_wait_status(st);
  return *exit_code_;
}

int ChildProcess::stop(std::chrono::milliseconds grace) {
  if (!running()) return exit_code_.value_or(-1);
  ::kill(pid_, SIGTERM);
  if (auto code = wait_for(grace)) return *code;
  if (group_) kill_process_group(pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  return wait();
}

bool kill_process_group(pid_t pgid, int sig) {
  if (pgid <= 1) return false;
  return ::kill(-pgid, sig) == 0;
}

std::string find_executable(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    std::error_code ec;
    if (access(candidate.c_str(), X_OK) == 0 && !std::filesystem::is_directory(candidate, ec)) return candidate;
  }
  return "";
}

int remove_leftovers_of_dead_processes(const std::string& root, const std::string& prefix) {
  namespace fs = std::filesystem;
  int removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const char* first = name.data() + prefix.size();
    const char* last = name.data() + name.size();
    long pid = 0;
    const auto [end, err] = std::from_chars(first, last, pid);
    if (err != std::errc() || end == first || end == last || *end != '-' || pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to ask
    std::error_code rm;
    if (fs::remove_all(e.path(), rm) > 0 && !rm) ++removed;
  }
  return removed;
}

int remove_leftovers_of_dead_processes_once(const std::string& root, const std::string& prefix) {
  static std::mutex mu;
  static std::set<std::pair<std::string, std::string>> swept;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!swept.emplace(root, prefix).second) return 0;
  }
  return remove_leftovers_of_dead_processes(root, prefix);
}

bool Confinement::any() const {
  return !cgroups.empty() || drop_root || user_namespace || mount_namespace || network_namespace || pid_namespace ||
         ipc_namespace || uts_namespace || drop_capabilities || no_new_privs || !seccomp_bpf.empty();
}

std::string Confinement::describe() const {
  if (!any()) return "none";
  std::vector<std::string> parts;
  if (drop_root) parts.push_back("uid " + std::to_string(unprivileged_uid) + " (for a root parent)");
  std::string ns;
  for (auto [on, name] : {std::pair{user_namespace, "user"},
                          {mount_namespace, "mount"},
                          {network_namespace, "net"},
                          {pid_namespace, "pid"},
                          {ipc_namespace, "ipc"},
                          {uts_namespace, "uts"}})
    if (on) ns += (ns.empty() ? "" : "+") + std::string(name);
  if (!ns.empty()) parts.push_back(ns + " namespaces");
  if (!hidden.empty()) parts.push_back(std::to_string(hidden.size()) + " paths hidden");
  if (!private_dirs.empty()) parts.push_back(std::to_string(private_dirs.size()) + " private tmpfs");
  if (!binds.empty()) parts.push_back(std::to_string(binds.size()) + " binds");
  if (fresh_proc) parts.push_back("fresh /proc");
  if (read_only_root) parts.push_back("read-only /");
  if (drop_capabilities) parts.push_back("no capabilities");
  if (no_new_privs) parts.push_back("no_new_privs");
  if (!seccomp_bpf.empty()) parts.push_back("seccomp");
  if (!cgroups.empty()) parts.push_back(std::to_string(cgroups.size()) + " cgroups");
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::string self_exe_path() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  buf[n] = 0;
  return buf;
}

std::string self_exe_dir() {
  std::string p = self_exe_path();
  auto slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

}  // namespace ak
