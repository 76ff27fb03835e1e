#include "common/confine.h"

#include <fcntl.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

namespace ak {
namespace {

std::string absolute_path(const std::string& p) {
  std::error_code ec;
  const std::filesystem::path a = std::filesystem::absolute(p, ec);
  return ec ? p : a.lexically_normal().string();
}

namespace fs = std::filesystem;

bool at_or_below(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         (dir.back() == '/' || path[dir.size()] == '/'));
}

// The canonical forms of `paths` (each as far as it exists).
std::vector<std::string> canonical_all(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const std::string& p : paths) out.push_back(fs::weakly_canonical(p, ec).string());
  return out;
}

// The outermost folder on the way to `path` (itself excluded) that uid/gid may not enter, or "";
// folders at or below a hidden path (`hidden_canon`, canonical) are fresh tmpfs in the child and do
// not count.
std::string closed_ancestor(const std::string& path, const std::vector<std::string>& hidden_canon, uint32_t uid,
                            uint32_t gid) {
  std::error_code ec;
  const fs::path canon = fs::weakly_canonical(path, ec);
  if (ec) return "";
  fs::path dir = canon.root_path();
  for (auto it = canon.begin(); it != canon.end(); ++it) {
    if (it == canon.begin()) continue;  // the root
    if (std::next(it) == canon.end()) break;
    dir /= *it;
    const std::string d = dir.string();
    if (std::any_of(hidden_canon.begin(), hidden_canon.end(), [&](const std::string& h) { return at_or_below(d, h); }))
      return "";
    struct stat st {};
    if (stat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return "";
    const bool enter = (st.st_uid == uid)   ? (st.st_mode & S_IXUSR) != 0
                       : (st.st_gid == gid) ? (st.st_mode & S_IXGRP) != 0
                                            : (st.st_mode & S_IXOTH) != 0;
    if (!enter) return d;
  }
  return "";
}

bool running_as_root() { return geteuid() == 0; }

// Runs `true` under `c`; ok when it started and exited 0.
Status try_child(const Confinement& c) {
  static const std::string program = [] {
    std::string p = find_executable("true");
    return p.empty() ? std::string("/bin/true") : p;
  }();
  SpawnOptions o;
  o.null_stdin = true;
  o.output_path = "/dev/null";
  o.confinement = c;
  auto child = ChildProcess::spawn({program}, o);
  if (!child.ok()) return child.status();
  auto code = child->wait_for(std::chrono::seconds(10));
  if (!code) {
    child->kill_group();
    return Status::timed_out("the probe child did not exit within 10 s");
  }
  if (*code != 0) return Status::unavailable("the probe child exited with code " + std::to_string(*code));
  return Status::ok_status();
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The folder of `controller` under which groups can be made: cgroup v1 (<fs>/<controller>) or v2
// (<fs> itself, with the controller enabled for children), "" when neither is writable.
std::string cgroup_root(const ProbeOptions& o, const std::string& controller, std::string* why) {
  std::error_code ec;
  fs::path base;
  if (fs::exists(fs::path(o.cgroup_fs) / controller / "cgroup.procs", ec)) {
    base = fs::path(o.cgroup_fs) / controller;
  } else if (fs::exists(fs::path(o.cgroup_fs) / "cgroup.controllers", ec)) {
    const std::string controllers = first_line(o.cgroup_fs + "/cgroup.subtree_control");
    if (controllers.find(controller) == std::string::npos) {
      *why = "cgroup v2 without the " + controller + " controller delegated (cgroup.subtree_control: '" + controllers +
             "')";
      return "";
    }
    base = o.cgroup_fs;
  } else {
    *why = "no " + controller + " cgroup hierarchy under " + o.cgroup_fs;
    return "";
  }
  const fs::path root = base / o.cgroup_parent;
  if (mkdir(root.c_str(), 0755) != 0 && errno != EEXIST) {
    *why = "cannot create " + root.string() + ": " + strerror(errno);
    return "";
  }
  if (access(root.c_str(), W_OK) != 0) {
    *why = root.string() + " is not writable: " + strerror(errno);
    return "";
  }
  // cgroup v2: a group's limits exist only where its parent enables the controller for its
  // children; the farm's folder holds no process itself, so it may (seen on a GPU host whose
  // root delegates memory and pids: without this every job's memory.max was EACCES).
  if (base == fs::path(o.cgroup_fs) &&
      first_line((root / "cgroup.subtree_control").string()).find(controller) == std::string::npos) {
    std::ofstream out(root / "cgroup.subtree_control", std::ios::app);
    out << "+" << controller << "\n";
    out.flush();
    if (!out) {
      *why = "cannot enable the " + controller + " controller in " + (root / "cgroup.subtree_control").string() + ": " +
             strerror(errno);
      return "";
    }
  }
  return root.string();
}

bool write_text(const std::string& path, const std::string& text, std::string* why) {
  std::ofstream out(path);
  out << text;
  out.flush();
  if (!out) {
    *why = "cannot write '" + text + "' to " + path + ": " + strerror(errno);
    return false;
  }
  return true;
}

}  // namespace

const char* confinement_layer_name(ConfinementLayer layer) {
  switch (layer) {
    case ConfinementLayer::kUnprivilegedUser:
      return "unprivileged user";
    case ConfinementLayer::kUserNamespace:
      return "user namespace";
    case ConfinementLayer::kMountNamespace:
      return "mount namespace";
    case ConfinementLayer::kReadOnlyRoot:
      return "read-only /";
    case ConfinementLayer::kNetworkNamespace:
      return "network namespace";
    case ConfinementLayer::kPidNamespace:
      return "pid namespace";
    case ConfinementLayer::kFreshProc:
      return "fresh /proc";
    case ConfinementLayer::kIpcUtsNamespaces:
      return "ipc+uts namespaces";
    case ConfinementLayer::kCapabilities:
      return "capabilities dropped";
    case ConfinementLayer::kNoNewPrivs:
      return "no_new_privs";
    case ConfinementLayer::kSeccomp:
      return "seccomp filter";
    case ConfinementLayer::kCgroupMemory:
      return "cgroup memory limit";
    case ConfinementLayer::kCgroupPids:
      return "cgroup pids limit";
  }
  return "?";
}

bool ConfinementSupport::has(ConfinementLayer layer) const {
  for (const auto& l : layers)
    if (l.layer == layer) return l.available;
  return false;
}

bool ConfinementSupport::sufficient() const {
  return has(ConfinementLayer::kUnprivilegedUser) || has(ConfinementLayer::kUserNamespace) ||
         has(ConfinementLayer::kMountNamespace) || has(ConfinementLayer::kPidNamespace) ||
         has(ConfinementLayer::kNetworkNamespace);
}

std::string ConfinementSupport::table() const {
  std::ostringstream out;
  for (const auto& l : layers) {
    std::string name = confinement_layer_name(l.layer);
    name.resize(22, ' ');
    out << "  " << name << (l.available ? "yes" : "NO ") << "  " << l.detail << "\n";
  }
  return out.str();
}

ConfinementSupport probe_confinement(const ProbeOptions& options) {
  ConfinementSupport s;
  auto record = [&](ConfinementLayer layer, const Status& st, const std::string& yes) {
    s.layers.push_back({layer, st.ok(), st.ok() ? yes : st.message()});
    return st.ok();
  };
  const bool root = running_as_root();

  // The unprivileged user.
  Confinement user;
  if (root) {
    user.drop_root = true;
    record(ConfinementLayer::kUnprivilegedUser, try_child(user), "children of this root worker run as uid 65534");
  } else {
    user = Confinement{};
    record(ConfinementLayer::kUnprivilegedUser, Status::ok_status(),
           "the worker itself runs as uid " + std::to_string(geteuid()) + " (not root); children keep it");
  }
  const bool dropped = s.has(ConfinementLayer::kUnprivilegedUser);

  // The base every namespace is tried on: a user namespace where there is one, else root's rights.
  Confinement base = user;
  base.drop_root = root && dropped;
  Confinement userns = base;
  userns.user_namespace = true;
  const bool have_userns =
      record(ConfinementLayer::kUserNamespace, try_child(userns), "the child's own uid mapped to itself");
  // A root worker makes the namespaces and mounts with its own rights and only then becomes the
  // unprivileged user (it can open what the mounts need, e.g. an interpreter under /root); a user
  // namespace is for a worker that is not root.
  if (have_userns && !root) base = userns;
  const bool can_ns = have_userns || root;
  const Status no_ns = Status::unavailable("needs a user namespace or a root worker; neither is available");

  Confinement mnt = base;
  mnt.mount_namespace = true;
  mnt.private_dirs = {"/tmp"};
  mnt.hidden = {"/run"};
  const bool have_mnt = record(ConfinementLayer::kMountNamespace, can_ns ? try_child(mnt) : no_ns,
                               "private /tmp (tmpfs), hidden paths, read-only binds");
  Confinement ro = mnt;
  ro.read_only_root = true;
  record(ConfinementLayer::kReadOnlyRoot, have_mnt ? try_child(ro) : Status::unavailable("needs the mount namespace"),
         "/ remounted read-only");

  Confinement net = base;
  net.network_namespace = true;
  record(ConfinementLayer::kNetworkNamespace, can_ns ? try_child(net) : no_ns, "only a loopback that is down");

  Confinement pid = base;
  pid.pid_namespace = true;
  const bool have_pid = record(ConfinementLayer::kPidNamespace, can_ns ? try_child(pid) : no_ns,
                               "the child runs under its own init; its tree ends with it");
  Confinement proc = mnt;
  proc.pid_namespace = true;
  proc.fresh_proc = true;
  record(ConfinementLayer::kFreshProc,
         have_mnt && have_pid ? try_child(proc) : Status::unavailable("needs the mount and pid namespaces"),
         "/proc shows only the child's namespace");

  Confinement ipc = base;
  ipc.ipc_namespace = ipc.uts_namespace = true;
  record(ConfinementLayer::kIpcUtsNamespaces, can_ns ? try_child(ipc) : no_ns, "own System V IPC and hostname");

  Confinement caps = base;
  caps.drop_capabilities = true;
  record(ConfinementLayer::kCapabilities, try_child(caps), "bounding, ambient and effective sets empty");

  Confinement nnp = base;
  nnp.no_new_privs = true;
  record(ConfinementLayer::kNoNewPrivs, try_child(nnp), "setuid binaries and file capabilities have no effect");

  auto bpf = candidate_seccomp_filter();
  if (!bpf.ok()) {
    record(ConfinementLayer::kSeccomp, bpf.status(), "");
  } else {
    Confinement sec = base;
    sec.seccomp_bpf = *bpf;
    record(ConfinementLayer::kSeccomp, try_child(sec),
           "libseccomp " + std::to_string(seccomp_version()->major) + "." + std::to_string(seccomp_version()->minor) +
               "." + std::to_string(seccomp_version()->micro) + ", " + std::to_string(bpf->size() / 8) +
               " BPF instructions");
  }

  for (auto [layer, controller] :
       {std::pair{ConfinementLayer::kCgroupMemory, "memory"}, std::pair{ConfinementLayer::kCgroupPids, "pids"}}) {
    std::string why;
    const std::string root_dir = cgroup_root(options, controller, &why);
    if (root_dir.empty()) {
      record(layer, Status::unavailable(why), "");
      continue;
    }
    (layer == ConfinementLayer::kCgroupMemory ? s.memory_cgroup_root : s.pids_cgroup_root) = root_dir;
    // A group of its own, limited, with a child in it.
    ConfinementSupport only;
    only.memory_cgroup_root = layer == ConfinementLayer::kCgroupMemory ? root_dir : "";
    only.pids_cgroup_root = layer == ConfinementLayer::kCgroupPids ? root_dir : "";
    auto group = CgroupJob::create(only, "probe-" + std::to_string(getpid()), 64 << 20, 16);
    Status st = group.ok() ? Status::ok_status() : group.status();
    if (st.ok()) {
      Confinement cg = base;
      cg.cgroups = group->dirs();
      st = try_child(cg);
    }
    if (!record(layer, st, "per-child groups under " + root_dir))
      (layer == ConfinementLayer::kCgroupMemory ? s.memory_cgroup_root : s.pids_cgroup_root).clear();
  }
  return s;
}

Result<std::vector<unsigned char>> candidate_seccomp_filter() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) return Status::unavailable("seccomp_init failed: libseccomp cannot build a filter here");
  struct Release {
    scmp_filter_ctx c;
    ~Release() { seccomp_release(c); }
  } release{ctx};
  std::string failed;
  auto add = [&](uint32_t action, const char* name, unsigned count, const scmp_arg_cmp* args) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return;  // not on this architecture
    if (seccomp_rule_add_array(ctx, action, nr, count, args) != 0)
      failed += std::string(failed.empty() ? "" : ", ") + name;
  };
  static const char* const kDenied[] = {"ptrace",
                                        "process_vm_readv",
                                        "process_vm_writev",
                                        "process_madvise",
                                        "pidfd_getfd",
                                        "kexec_load",
                                        "kexec_file_load",
                                        "init_module",
                                        "finit_module",
                                        "delete_module",
                                        "mount",
                                        "umount2",
                                        "pivot_root",
                                        "chroot",
                                        "move_mount",
                                        "open_tree",
                                        "fsopen",
                                        "fsconfig",
                                        "fsmount",
                                        "fspick",
                                        "mount_setattr",
                                        "unshare",
                                        "setns",
                                        "bpf",
                                        "keyctl",
                                        "add_key",
                                        "request_key",
                                        "perf_event_open",
                                        "reboot",
                                        "swapon",
                                        "swapoff",
                                        "acct",
                                        "quotactl",
                                        "settimeofday",
                                        "clock_settime",
                                        "clock_adjtime",
                                        "adjtimex",
                                        "open_by_handle_at",
                                        "name_to_handle_at",
                                        "userfaultfd",
                                        "io_uring_setup",
                                        "io_uring_enter",
                                        "io_uring_register",
                                        "syslog",
                                        "iopl",
                                        "ioperm",
                                        "fanotify_init",
                                        "lookup_dcookie",
                                        "vhangup",
                                        "nfsservctl",
                                        "uselib"};
  for (const char* name : kDenied) add(SCMP_ACT_ERRNO(EPERM), name, 0, nullptr);
  for (int family : {AF_INET, AF_INET6, AF_NETLINK, AF_PACKET}) {
    const scmp_arg_cmp arg = SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(family));
    add(SCMP_ACT_ERRNO(EPERM), "socket", 1, &arg);
  }
  for (unsigned long flag :
       {CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID, CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP}) {
    const scmp_arg_cmp arg = SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag);
    add(SCMP_ACT_ERRNO(EPERM), "clone", 1, &arg);
  }
  // clone3 passes its flags in memory, out of a filter's reach: ENOSYS makes libc use clone.
  add(SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, nullptr);
  const scmp_arg_cmp sti = SCMP_A1(SCMP_CMP_EQ, static_cast<scmp_datum_t>(TIOCSTI));
  add(SCMP_ACT_ERRNO(EPERM), "ioctl", 1, &sti);
  if (!failed.empty()) return Status::internal("libseccomp refused the rules for " + failed);

  // libseccomp 2.5 (Debian 12) exports only to a descriptor: a memfd, read back here.
  const int fd = memfd_create("ak-seccomp", MFD_CLOEXEC);
  if (fd < 0) return Status::unavailable(std::string("memfd_create for the seccomp filter: ") + strerror(errno));
  struct Close {
    int fd;
    ~Close() { close(fd); }
  } closer{fd};
  if (const int rc = seccomp_export_bpf(ctx, fd); rc != 0)
    return Status::internal(std::string("seccomp_export_bpf failed: ") + strerror(-rc));
  std::vector<unsigned char> out;
  if (lseek(fd, 0, SEEK_SET) != 0) return Status::internal("cannot rewind the seccomp memfd");
  unsigned char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::internal(std::string("cannot read the seccomp filter back: ") + strerror(errno));
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  if (out.empty() || out.size() % 8 != 0) return Status::internal("libseccomp exported a malformed filter");
  return out;
}

Result<CgroupJob> CgroupJob::create(const ConfinementSupport& support, const std::string& name, int64_t memory_bytes,
                                    int64_t pids_max) {
  CgroupJob job;
  auto make = [&](const std::string& root, const std::string& file, const std::string& value) -> Status {
    const std::string dir = root + "/" + name;
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
      return Status::unavailable("cannot create cgroup " + dir + ": " + strerror(errno));
    job.dirs_.push_back(dir);
    std::string why;
    if (!write_text(dir + "/" + file, value, &why)) return Status::unavailable(why);
    return Status::ok_status();
  };
  if (memory_bytes > 0 && !support.memory_cgroup_root.empty()) {
    const bool v1 = fs::exists(support.memory_cgroup_root + "/memory.limit_in_bytes");
    if (Status s =
            make(support.memory_cgroup_root, v1 ? "memory.limit_in_bytes" : "memory.max", std::to_string(memory_bytes));
        !s.ok())
      return s;
  }
  if (pids_max > 0 && !support.pids_cgroup_root.empty()) {
    // v2: one group holds both controllers; the limit goes into the same folder.
    if (Status s = make(support.pids_cgroup_root, "pids.max", std::to_string(pids_max)); !s.ok()) return s;
  }
  std::sort(job.dirs_.begin(), job.dirs_.end());
  job.dirs_.erase(std::unique(job.dirs_.begin(), job.dirs_.end()), job.dirs_.end());
  return job;
}

CgroupJob::CgroupJob(CgroupJob&& o) noexcept : dirs_(std::exchange(o.dirs_, {})) {}

CgroupJob& CgroupJob::operator=(CgroupJob&& o) noexcept {
  if (this != &o) {
    remove();
    dirs_ = std::exchange(o.dirs_, {});
  }
  return *this;
}

CgroupJob::~CgroupJob() { remove(); }

int CgroupJob::kill_all() {
  int n = 0;
  for (const std::string& dir : dirs_) {
    std::ifstream in(dir + "/cgroup.procs");
    long pid = 0;
    while (in >> pid)
      if (pid > 1 && ::kill(static_cast<pid_t>(pid), SIGKILL) == 0) ++n;
  }
  return n;
}

void CgroupJob::remove() {
  if (dirs_.empty()) return;
  // A killed task leaves its group as it exits: a few tries while the kernel finishes that.
  for (int attempt = 0; attempt < 200 && !dirs_.empty(); ++attempt) {
    kill_all();
    for (auto it = dirs_.begin(); it != dirs_.end();) {
      if (rmdir(it->c_str()) == 0 || errno == ENOENT) {
        it = dirs_.erase(it);
      } else {
        ++it;
      }
    }
    if (!dirs_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (const std::string& dir : dirs_) spdlog::warn("cannot remove cgroup {}: {}", dir, strerror(errno));
  dirs_.clear();
}

uint32_t ConfinementPolicy::child_uid() const {
  if (!unconfined && running_as_root() && support.has(ConfinementLayer::kUnprivilegedUser)) return unprivileged_uid;
  return static_cast<uint32_t>(geteuid());
}

uint32_t ConfinementPolicy::child_gid() const {
  if (!unconfined && running_as_root() && support.has(ConfinementLayer::kUnprivilegedUser)) return unprivileged_gid;
  return static_cast<uint32_t>(getegid());
}

Confinement ConfinementPolicy::for_child(const ChildView& view) const {
  Confinement c;
  if (unconfined) return c;
  using L = ConfinementLayer;
  c.drop_root = running_as_root() && support.has(L::kUnprivilegedUser);
  c.unprivileged_uid = unprivileged_uid;
  c.unprivileged_gid = unprivileged_gid;
  // Root makes the namespaces itself (see probe_confinement); others need a user namespace.
  c.user_namespace = !running_as_root() && support.has(L::kUserNamespace);
  c.mount_namespace = support.has(L::kMountNamespace);
  if (c.mount_namespace) {
    c.private_dirs = {"/tmp"};
    std::error_code ec;
    if (fs::is_directory("/dev/shm", ec)) c.private_dirs.push_back("/dev/shm");
    c.hidden = hidden;
    c.hidden.insert(c.hidden.end(), view.hidden.begin(), view.hidden.end());
    c.binds = view.binds;
    // Absolute paths: the child resolves them after its private /tmp is mounted, where a path
    // relative to a working directory under /tmp would name the hidden tree instead of the view.
    for (std::string& h : c.hidden) h = absolute_path(h);
    for (Confinement::Bind& b : c.binds) {
      b.source = absolute_path(b.source);
      b.target = absolute_path(b.target);
    }
    // Each hidden path with its canonical form, computed once per child.
    std::vector<std::string> hidden_canon = canonical_all(c.hidden);
    // A root parent's child runs as another uid: a bind or a needed path below a folder that uid
    // may not enter (root's mktemp -d folder, a 0700 home) would be out of its reach, and a compile
    // there fails with nothing but "compilation terminated". Such a folder is hidden too; the binds
    // and needed paths below it come back inside the empty tmpfs that takes its place.
    if (c.drop_root) {
      std::vector<std::string> reached;
      for (const Confinement::Bind& b : c.binds) reached.push_back(b.target);
      for (const std::string& n : view.needed) reached.push_back(absolute_path(n));
      const size_t policy_hidden = hidden_canon.size();  // closed folders (canonical) join the list
      for (const std::string& path : reached) {
        if (std::string d = closed_ancestor(path, hidden_canon, unprivileged_uid, unprivileged_gid); !d.empty())
          hidden_canon.push_back(std::move(d));
      }
      const std::vector<std::string> closed(hidden_canon.begin() + policy_hidden, hidden_canon.end());
      // A hidden path below a closed folder is gone with it (its tmpfs is not remounted there).
      std::vector<std::string> kept, kept_canon;
      for (size_t i = 0; i < policy_hidden; ++i)
        if (std::none_of(closed.begin(), closed.end(), [&](const std::string& d) {
              return hidden_canon[i] != d && at_or_below(hidden_canon[i], d);
            })) {
          kept.push_back(c.hidden[i]);
          kept_canon.push_back(hidden_canon[i]);
        }
      kept.insert(kept.end(), closed.begin(), closed.end());
      kept_canon.insert(kept_canon.end(), closed.begin(), closed.end());
      c.hidden = std::move(kept);
      hidden_canon = std::move(kept_canon);
    }
    // A hidden path at or below another (a worker's state folder under the hidden /root) is hidden
    // with it, and no longer exists in the child once the other's tmpfs is mounted: only the
    // outermost of each nest is kept.
    {
      std::vector<std::string> outer, outer_canon;
      for (size_t i = 0; i < hidden_canon.size(); ++i) {
        bool covered = false;
        for (size_t j = 0; j < hidden_canon.size() && !covered; ++j)
          covered =
              j != i && at_or_below(hidden_canon[i], hidden_canon[j]) && (hidden_canon[i] != hidden_canon[j] || j < i);
        if (!covered) {
          outer.push_back(c.hidden[i]);
          outer_canon.push_back(hidden_canon[i]);
        }
      }
      c.hidden = std::move(outer);
      hidden_canon = std::move(outer_canon);
    }
    // What the child needs below a hidden path (an interpreter under /root) comes back read-only.
    for (const std::string& canon : canonical_all(view.needed))
      if (std::any_of(hidden_canon.begin(), hidden_canon.end(),
                      [&](const std::string& h) { return at_or_below(canon, h); }))
        c.binds.push_back({canon, canon, true});

    c.read_only_root = support.has(L::kReadOnlyRoot);
  }
  c.network_namespace = support.has(L::kNetworkNamespace);
  c.pid_namespace = support.has(L::kPidNamespace);
  c.fresh_proc = c.mount_namespace && c.pid_namespace && support.has(L::kFreshProc);
  c.ipc_namespace = c.uts_namespace = support.has(L::kIpcUtsNamespaces);
  c.drop_capabilities = support.has(L::kCapabilities);
  c.no_new_privs = support.has(L::kNoNewPrivs);
  if (support.has(L::kSeccomp)) c.seccomp_bpf = seccomp_bpf;
  c.cgroups = view.cgroups;
  return c;
}

CgroupJob ConfinementPolicy::make_cgroup(const std::string& name) const {
  if (unconfined || (support.memory_cgroup_root.empty() && support.pids_cgroup_root.empty())) return {};
  auto job = CgroupJob::create(support, name, memory_limit_bytes, pids_max);
  if (!job.ok()) {
    static std::once_flag logged;
    std::call_once(logged, [&] { spdlog::warn("children run without a cgroup: {}", job.status().message()); });
    return {};
  }
  return std::move(*job);
}

namespace {

// Removes the per-child groups (<kind>-<pid>-...) of workers that are gone: a worker killed with
// SIGKILL leaves its groups behind (their tasks died with it: PR_SET_PDEATHSIG).
void remove_groups_of_dead_workers(const std::string& root) {
  if (root.empty()) return;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    if (!e.is_directory()) continue;
    const std::string name = e.path().filename().string();
    const size_t dash = name.find('-');
    if (dash == std::string::npos) continue;
    const long pid = std::atol(name.c_str() + dash + 1);
    if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::ifstream procs(e.path() / "cgroup.procs");
    long task = 0;
    while (procs >> task)
      if (task > 1) ::kill(static_cast<pid_t>(task), SIGKILL);
    rmdir(e.path().c_str());  // a group whose tasks are still exiting stays for the next sweep
  }
}

}  // namespace

const std::vector<std::string>& kept_env_names() {
  static const std::vector<std::string> names = {"PATH",
                                                 "LD_LIBRARY_PATH",
                                                 "LANG",
                                                 "LC_ALL",
                                                 "CUDA_HOME",
                                                 "CUDA_PATH",
                                                 "CUDA_VISIBLE_DEVICES",
                                                 "CUDA_DEVICE_ORDER",
                                                 "NVIDIA_VISIBLE_DEVICES",
                                                 "CUDA_MODULE_LOADING"};
  return names;
}

std::vector<std::string> inherited_env(char** env) {
  std::vector<std::string> out;
  for (char** e = env; e && *e; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq == 0 || eq == std::string::npos) continue;
    out.push_back(entry);
  }
  return out;
}

Result<ConfinementPolicy> make_confinement_policy(bool unconfined, std::vector<std::string> hidden,
                                                  int64_t memory_limit_bytes, int64_t pids_max) {
  ConfinementPolicy p;
  p.unconfined = unconfined;
  p.memory_limit_bytes = memory_limit_bytes;
  p.pids_max = pids_max;
  p.support = probe_confinement();
  remove_groups_of_dead_workers(p.support.memory_cgroup_root);
  remove_groups_of_dead_workers(p.support.pids_cgroup_root);
  for (const char* path : {"/run", "/var/run", "/root", "/home", "/etc/shadow", "/etc/gshadow", "/var/lib/redis"})
    hidden.push_back(path);
  p.hidden = std::move(hidden);
  if (p.support.has(ConfinementLayer::kSeccomp)) {
    auto bpf = candidate_seccomp_filter();
    if (bpf.ok()) p.seccomp_bpf = std::move(*bpf);
  }
  for (const auto& l : p.support.layers)
    spdlog::info("confinement: {}: {} ({})", confinement_layer_name(l.layer), l.available ? "yes" : "NO", l.detail);
  if (unconfined) {
    spdlog::warn("confinement: --unconfined: candidates run with this worker's rights (rlimits only)");
    return p;
  }
  if (!p.support.sufficient())
    return Status::unavailable(
        "cannot confine candidates on this machine: no unprivileged user and no namespace is available:\n" +
        p.support.table() +
        "run as root or where user namespaces are allowed, or pass --unconfined to run "
        "candidates with the worker's rights");
  // Every layer together, as a candidate gets them.
  auto group = p.make_cgroup("probe-all-" + std::to_string(getpid()));
  ConfinementPolicy::ChildView view;
  view.cgroups = group.dirs();
  if (Status s = try_child(p.for_child(view)); !s.ok())
    return Status::unavailable("the confinement layers each work but not together: " + s.message() +
                               "; pass --unconfined to run candidates with the worker's rights");
  return p;
}

}  // namespace ak
