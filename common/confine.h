// Confining candidate code (issue 19, "Candidates confined"): which layers of Confinement
// (common/process.h) this machine allows, the seccomp filter candidates run under, per-job cgroups,
// and the policy a worker builds every candidate's Confinement from.
//
// Layers, in the order a child applies them (worker/sandbox/VERIFICATION.md, "Confinement", says
// what each one keeps a candidate from doing and what the worker does where one is missing):
//   unprivileged user, user namespace, mount namespace (private /tmp, hidden paths, read-only
//   binds, read-only /), network namespace, pid namespace (fresh /proc), ipc+uts namespaces,
//   capabilities dropped, no_new_privs, seccomp filter, cgroup memory limit, cgroup pids limit.
//
// Thread-safety: probe_confinement spawns children and takes a moment; call it once at start.
// Everything else is plain data or owned by one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/process.h"
#include "common/status.h"

namespace ak {

enum class ConfinementLayer {
  kUnprivilegedUser = 0,
  kUserNamespace,
  kMountNamespace,
  kReadOnlyRoot,
  kNetworkNamespace,
  kPidNamespace,
  kFreshProc,
  kIpcUtsNamespaces,
  kCapabilities,
  kNoNewPrivs,
  kSeccomp,
  kCgroupMemory,
  kCgroupPids,
};
constexpr int kConfinementLayers = 13;
const char* confinement_layer_name(ConfinementLayer layer);

struct LayerSupport {
  ConfinementLayer layer = ConfinementLayer::kUnprivilegedUser;
  bool available = false;
  std::string detail;  // how it was found out, or why it is unavailable
};

// What probe_confinement found: one entry per layer, in enum order.
struct ConfinementSupport {
  std::vector<LayerSupport> layers;
  // The cgroup v1 (or v2) folders under which per-job groups are made; "" where unavailable.
  std::string memory_cgroup_root;
  std::string pids_cgroup_root;

  bool has(ConfinementLayer layer) const;
  // A candidate gets at least an unprivileged user or a namespace: without either it would run with
  // the worker's rights, and the worker refuses to start unless told --unconfined.
  bool sufficient() const;
  // One line per layer: "  seccomp filter            yes  (...)".
  std::string table() const;
};

struct ProbeOptions {
  // Where per-job cgroups go: <root>/<controller>/<cgroup_parent>/...
  std::string cgroup_fs = "/sys/fs/cgroup";
  std::string cgroup_parent = "autokernel";
};

// Tries each layer in a throwaway child (`true`, with that layer and what it needs) and records
// which the kernel allows. Never fails: a layer that cannot be tried is unavailable, with the reason.
ConfinementSupport probe_confinement(const ProbeOptions& options = {});

// The filter candidates run under (default allow; EPERM for what a kernel candidate never needs):
// ptrace, process_vm_readv/writev, kexec_*, init/finit/delete_module, mount and the new mount API,
// umount2, pivot_root, chroot, unshare, setns, clone/clone3 with namespace flags (clone3: ENOSYS so
// libc falls back to clone), bpf, keyctl/add_key/request_key, perf_event_open, reboot,
// swapon/swapoff, acct, quotactl, clock and time setting, open_by_handle_at, userfaultfd,
// io_uring_*, syslog, iopl/ioperm, fanotify_init, socket() of AF_INET, AF_INET6, AF_NETLINK and
// AF_PACKET. Built with libseccomp and exported as raw BPF (struct sock_filter array) for
// Confinement::seccomp_bpf.
Result<std::vector<unsigned char>> candidate_seccomp_filter();

// A cgroup per job (or per sandbox): <root>/<parent>/<name> in the memory and pids hierarchies
// that `support` found writable, with memory.limit_in_bytes (v1) / memory.max (v2) and pids.max
// set. The child joins it through Confinement::cgroups (dirs()). kill_all() SIGKILLs every task
// still in it; the destructor does that and removes the groups. Movable, not copyable.
class CgroupJob {
 public:
  // `memory_bytes` or `pids_max` <= 0: that controller is left out. A controller whose group cannot
  // be made or limited is an error (callers log it and go on without the group).
  static Result<CgroupJob> create(const ConfinementSupport& support, const std::string& name, int64_t memory_bytes,
                                  int64_t pids_max);
  CgroupJob() = default;
  CgroupJob(CgroupJob&& o) noexcept;
  CgroupJob& operator=(CgroupJob&& o) noexcept;
  CgroupJob(const CgroupJob&) = delete;
  CgroupJob& operator=(const CgroupJob&) = delete;
  ~CgroupJob();

  const std::vector<std::string>& dirs() const { return dirs_; }
  // SIGKILL to every task in the groups; returns how many were signalled.
  int kill_all();
  // Kills what is left and removes the groups (also done by the destructor).
  void remove();

 private:
  std::vector<std::string> dirs_;
};

// What a worker confines its candidates with: the layers it found (or was told to skip), what to
// hide, and the limits. Built once at worker start (make_confinement_policy), then copied into
// every runner; for_child() makes each child's Confinement.
struct ConfinementPolicy {
  bool unconfined = false;  // --unconfined: children run as before (rlimits only)
  ConfinementSupport support;
  // Paths a candidate must not see (the worker's state dir, the compile cache, /run, /var/run,
  // /root, the farm's data dirs): hidden where there is a mount namespace.
  std::vector<std::string> hidden;
  std::vector<unsigned char> seccomp_bpf;
  int64_t memory_limit_bytes = 0;  // per child's cgroup; 0: none
  int64_t pids_max = 4096;         // per child's cgroup (tasks: threads count too); 0: none
  uint32_t unprivileged_uid = 65534;
  uint32_t unprivileged_gid = 65534;

  // A Confinement with every available layer: private tmpfs on /tmp and /dev/shm, the policy's
  // `hidden` plus the view's, the view's binds and cgroups. Each of the view's `needed` paths (the
  // child's executable, its interpreter's prefix) that lies below a hidden path is bound back
  // read-only at its place. Nothing when unconfined.
  struct ChildView {
    std::vector<Confinement::Bind> binds;
    std::vector<std::string> hidden;
    std::vector<std::string> needed;
    std::vector<std::string> cgroups;  // CgroupJob::dirs()
  };
  Confinement for_child(const ChildView& view) const;
  Confinement for_child() const { return for_child(ChildView{}); }
  // The uid a confined child runs as, seen from outside (files it must write are chowned to it).
  uint32_t child_uid() const;
  uint32_t child_gid() const;
  bool mount_namespace() const { return !unconfined && support.has(ConfinementLayer::kMountNamespace); }
  // A cgroup for one child, or an empty one (logged once) where cgroups are unavailable.
  CgroupJob make_cgroup(const std::string& name) const;
};

// The variables a confined child (candidate, compiler, KernelBench step) keeps from the worker's
// environment; everything else, secrets included, is dropped: search paths, locale, the toolkit's
// location and the GPU selection.
const std::vector<std::string>& kept_env_names();

// An unconfined worker's whole environment ("NAME=value" entries of `env`, a null-terminated
// array such as environ) for its sandboxes, for a profiler's or debugger's injection (ncu
// --target-processes all, compute-sanitizer): every well-formed entry. The supervisor sets the
// sandbox's private folder (TMPDIR, HOME, CUDA_CACHE_PATH, TRITON_CACHE_DIR) after these, so it wins.
// Never for a confined worker, whose candidates get kept_env_names() alone (`worker --inherit-env`
// needs --unconfined).
std::vector<std::string> inherited_env(char** env);

// Probes, builds the filter and fills the policy. Errors: kUnavailable when the layers found are not
// sufficient() and `unconfined` is false (the message lists the table and names --unconfined).
Result<ConfinementPolicy> make_confinement_policy(bool unconfined, std::vector<std::string> hidden,
                                                  int64_t memory_limit_bytes = 0, int64_t pids_max = 4096);

}  // namespace ak
