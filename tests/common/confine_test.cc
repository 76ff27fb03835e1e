// Confinement (common/process.h) and its probe, policy and cgroups (common/confine.h): a child
// (tests/common/confine_child.cc) tries each forbidden thing under one layer at a time and prints
// what happened. Layers the probe finds unavailable on this machine skip with the probe's reason;
// CI runs as root with user namespaces, seccomp and cgroups v1, where every test runs.
#include "common/confine.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/file.h"

namespace ak {
namespace {

using namespace std::chrono;
namespace fs = std::filesystem;

const ConfinementSupport& support() {
  static const ConfinementSupport s = probe_confinement();
  return s;
}

#define AK_REQUIRE_LAYER(layer)                                                                        \
  do {                                                                                                 \
    if (!support().has(layer))                                                                         \
      GTEST_SKIP() << confinement_layer_name(layer) << " is unavailable here:\n" << support().table(); \
  } while (0)

// The base every namespace test builds on, as the worker's policy does: a user namespace where there
// is one, the unprivileged user for a root parent.
Confinement base() {
  Confinement c;
  c.drop_root = geteuid() == 0 && support().has(ConfinementLayer::kUnprivilegedUser);
  c.user_namespace = geteuid() != 0 && support().has(ConfinementLayer::kUserNamespace);
  return c;
}

struct Outcome {
  Status spawned;
  std::string line;  // the child's first line: "ok ..." or "denied ..."
  int code = -1;
};

Outcome run_child(const std::vector<std::string>& args, const Confinement& c) {
  SpawnOptions o;
  o.capture_stdout = true;
  o.null_stdin = true;
  o.confinement = c;
  std::vector<std::string> argv = {AK_CONFINE_CHILD};
  argv.insert(argv.end(), args.begin(), args.end());
  Outcome out;
  auto child = ChildProcess::spawn(argv, o);
  if (!child.ok()) {
    out.spawned = child.status();
    return out;
  }
  auto line = child->read_line(seconds(20));
  if (line.ok() && line->has_value()) out.line = **line;
  out.code = child->wait_for(seconds(20)).value_or(-1);
  if (out.code < 0) child->kill_group();
  return out;
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// A file only root may read, created by the test.
std::string root_only_file() {
  static const std::string path = [] {
    std::string p = fs::temp_directory_path().string() + "/ak-confine-secret-" + std::to_string(getpid());
    std::ofstream(p) << "secret";
    chmod(p.c_str(), 0600);
    return p;
  }();
  return path;
}

// An unconfined worker's --inherit-env: its whole environment for the sandbox (a profiler's
// injection variables among it), less entries that are no NAME=value. The private folders in it
// are overridden by the supervisor (SandboxSupervisor.SandboxGetsAScrubbedEnvironment...).
TEST(InheritedEnv, KeepsEveryWellFormedEntry) {
  std::vector<std::string> entries = {"LD_PRELOAD=/opt/profiler/inject.so",
                                      "CUDA_INJECTION64_PATH=/opt/profiler/cuda.so",
                                      "TMPDIR=/tmp",
                                      "HOME=/root",
                                      "CUDA_CACHE_PATH=/root/.nv",
                                      "TRITON_CACHE_DIR=/root/.triton",
                                      "HOMEPAGE=https://example.org",
                                      "EMPTY=",
                                      "=no_name",
                                      "NO_EQUALS"};
  std::vector<char*> env;
  for (std::string& e : entries) env.push_back(e.data());
  env.push_back(nullptr);
  EXPECT_EQ(
      inherited_env(env.data()),
      (std::vector<std::string>{"LD_PRELOAD=/opt/profiler/inject.so", "CUDA_INJECTION64_PATH=/opt/profiler/cuda.so",
                                "TMPDIR=/tmp", "HOME=/root", "CUDA_CACHE_PATH=/root/.nv",
                                "TRITON_CACHE_DIR=/root/.triton", "HOMEPAGE=https://example.org", "EMPTY="}));
  EXPECT_TRUE(inherited_env(nullptr).empty());
}

TEST(ConfineProbe, ReportsEveryLayerOnceWithAReason) {
  const ConfinementSupport& s = support();
  ASSERT_EQ(s.layers.size(), static_cast<size_t>(kConfinementLayers));
  for (int i = 0; i < kConfinementLayers; ++i) {
    EXPECT_EQ(static_cast<int>(s.layers[i].layer), i);
    EXPECT_FALSE(s.layers[i].detail.empty()) << confinement_layer_name(s.layers[i].layer);
  }
  std::cout << s.table();
}

TEST(ConfineUser, ARootParentsChildRunsAsNobodyAndCannotReadRootsFilesOrBecomeRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "the test runs as uid " << geteuid() << ", not root";
  AK_REQUIRE_LAYER(ConfinementLayer::kUnprivilegedUser);
  Confinement c;
  c.drop_root = true;
  Outcome id = run_child({"id"}, c);
  ASSERT_TRUE(id.spawned.ok()) << id.spawned.message();
  EXPECT_TRUE(starts_with(id.line, "ok uid 65534 euid 65534 gid 65534")) << id.line;
  EXPECT_NE(id.line.find("capeff 0000000000000000"), std::string::npos) << id.line;
  EXPECT_TRUE(starts_with(run_child({"read", root_only_file()}, c).line, "denied")) << "read a root-only file";
  EXPECT_TRUE(starts_with(run_child({"setuid0"}, c).line, "denied"));
  // The unconfined control reads it.
  EXPECT_TRUE(starts_with(run_child({"read", root_only_file()}, Confinement{}).line, "ok"));
}

TEST(ConfineUser, TheUserNamespaceMapsOnlyTheChildsOwnUidAndLeavesNoCapabilityAfterExec) {
  AK_REQUIRE_LAYER(ConfinementLayer::kUserNamespace);
  Confinement c = base();
  c.user_namespace = true;  // also under a root parent, which drops to nobody first
  c.drop_capabilities = true;
  Outcome id = run_child({"id"}, c);
  ASSERT_TRUE(id.spawned.ok()) << id.spawned.message();
  const std::string uid = std::to_string(geteuid() == 0 ? 65534 : geteuid());
  EXPECT_TRUE(starts_with(id.line, "ok uid " + uid + " euid " + uid)) << id.line;
  EXPECT_NE(id.line.find("capeff 0000000000000000 capbnd 0000000000000000"), std::string::npos) << id.line;
  EXPECT_TRUE(starts_with(run_child({"read", root_only_file()}, c).line, "denied"));
}

TEST(ConfineMount, PrivateTmpHidesTheHostsTmpAndKeepsTheChildsWritesToItself) {
  AK_REQUIRE_LAYER(ConfinementLayer::kMountNamespace);
  const std::string host_file = root_only_file();
  Confinement c = base();
  c.mount_namespace = true;
  c.private_dirs = {"/tmp"};
  EXPECT_TRUE(starts_with(run_child({"exists", host_file}, c).line, "denied"));
  const std::string written = "/tmp/ak-confine-written-" + std::to_string(getpid());
  EXPECT_TRUE(starts_with(run_child({"write", written}, c).line, "ok"));
  EXPECT_FALSE(fs::exists(written)) << "the child's /tmp is not the host's";
}

TEST(ConfineMount, HiddenPathsAreEmptyAndReadOnlyBindsCannotBeWritten) {
  AK_REQUIRE_LAYER(ConfinementLayer::kMountNamespace);
  const fs::path dir = fs::temp_directory_path() / ("ak-confine-" + std::to_string(getpid()));
  fs::create_directories(dir / "secret");
  fs::create_directories(dir / "shared");
  std::ofstream(dir / "secret" / "cache.so") << "binary";
  std::ofstream(dir / "shared" / "artefact.so") << "artefact";
  fs::permissions(dir, fs::perms::all);
  fs::permissions(dir / "shared", fs::perms::all);
  fs::permissions(dir / "shared" / "artefact.so", fs::perms::all);
  Confinement c = base();
  c.mount_namespace = true;
  c.hidden = {(dir / "secret").string()};
  c.binds = {{(dir / "shared").string(), (dir / "shared").string(), true}};
  EXPECT_TRUE(starts_with(run_child({"exists", (dir / "secret" / "cache.so").string()}, c).line, "denied"));
  EXPECT_TRUE(starts_with(run_child({"write", (dir / "secret" / "new.so").string()}, c).line, "denied"));
  EXPECT_TRUE(starts_with(run_child({"read", (dir / "shared" / "artefact.so").string()}, c).line, "ok 8 bytes"));
  EXPECT_TRUE(starts_with(run_child({"write", (dir / "shared" / "artefact.so").string()}, c).line, "denied"));
  EXPECT_EQ(read_file((dir / "shared" / "artefact.so").string()).value(), "artefact");
  // A bind below a private /tmp: its parents are made in the fresh tmpfs.
  c.private_dirs = {"/tmp"};
  c.hidden.clear();
  EXPECT_TRUE(starts_with(run_child({"read", (dir / "shared" / "artefact.so").string()}, c).line, "ok 8 bytes"));
  EXPECT_TRUE(starts_with(run_child({"exists", (dir / "secret").string()}, c).line, "denied"));
  fs::remove_all(dir);
}

TEST(ConfineMount, ReadOnlyRootRefusesWritesOutsideThePrivateDirs) {
  AK_REQUIRE_LAYER(ConfinementLayer::kReadOnlyRoot);
  Confinement c = base();
  c.drop_root = false;  // root's own child: only the read-only mount stops it
  c.user_namespace = support().has(ConfinementLayer::kUserNamespace);
  c.mount_namespace = true;
  c.private_dirs = {"/tmp"};
  c.read_only_root = true;
  const std::string outside = "/var/tmp/ak-confine-ro-" + std::to_string(getpid());
  EXPECT_TRUE(starts_with(run_child({"write", outside}, c).line, "denied"));
  EXPECT_FALSE(fs::exists(outside));
  EXPECT_TRUE(starts_with(run_child({"write", "/tmp/ok"}, c).line, "ok"));
}

// A TCP listener of the test on 127.0.0.1, so that "unreachable" is not "nobody listens".
struct Listener {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int port = 0;
  Listener() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(fd, 4), 0);
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Listener() { close(fd); }
};

TEST(ConfineNetwork, TheNetworkNamespaceCannotReachTheHostsLoopback) {
  AK_REQUIRE_LAYER(ConfinementLayer::kNetworkNamespace);
  Listener l;
  EXPECT_TRUE(starts_with(run_child({"inet", std::to_string(l.port)}, Confinement{}).line, "ok connected"));
  Confinement c = base();
  c.network_namespace = true;
  EXPECT_TRUE(starts_with(run_child({"inet", std::to_string(l.port)}, c).line, "denied"));
}

TEST(ConfinePid, TheChildSeesOnlyItsOwnNamespaceAndCannotSignalItsParent) {
  AK_REQUIRE_LAYER(ConfinementLayer::kFreshProc);
  Confinement c = base();
  c.mount_namespace = true;
  c.pid_namespace = true;
  c.fresh_proc = true;
  Outcome id = run_child({"id"}, c);
  EXPECT_NE(id.line.find(" pid 2 "), std::string::npos) << id.line;
  EXPECT_EQ(run_child({"pids"}, c).line, "ok 2") << "the namespace's init and the program";
  // This test process is outside: its pid names nobody inside (or the namespace's own processes).
  const Outcome k = run_child({"kill", std::to_string(getpid())}, c);
  EXPECT_TRUE(starts_with(k.line, "denied") || k.code == 128 + SIGKILL) << k.line;
  EXPECT_EQ(kill(getpid(), 0), 0);
}

TEST(ConfinePid, ExitCodesAndSignalsOfTheNamespacesInitReachTheParent) {
  AK_REQUIRE_LAYER(ConfinementLayer::kPidNamespace);
  Confinement c = base();
  c.pid_namespace = true;
  EXPECT_EQ(run_child({"exit", "7"}, c).code, 7);
  SpawnOptions o;
  o.confinement = c;
  o.null_stdin = true;
  auto child = ChildProcess::spawn({AK_CONFINE_CHILD, "signal", std::to_string(SIGSEGV)}, o);
  ASSERT_TRUE(child.ok()) << child.status().message();
  EXPECT_EQ(child->wait(), 128 + SIGSEGV);
  EXPECT_TRUE(WIFSIGNALED(*child->wait_status()));
}

TEST(ConfinePid, KillingTheChildEndsADaemonItStartedInItsNamespace) {
  AK_REQUIRE_LAYER(ConfinementLayer::kPidNamespace);
  Confinement c = base();
  c.pid_namespace = true;
  SpawnOptions o;
  o.capture_stdout = true;
  o.null_stdin = true;
  o.new_process_group = true;
  o.confinement = c;
  auto child = ChildProcess::spawn({AK_CONFINE_CHILD, "daemon"}, o);
  ASSERT_TRUE(child.ok()) << child.status().message();
  auto line = child->read_line(seconds(20));
  ASSERT_TRUE(line.ok() && line->has_value());
  EXPECT_EQ(**line, "ok forked");
  // The daemon left the process group (setsid) but holds our stdout pipe: EOF once it is gone.
  child->kill_group();
  auto eof = child->read_line(seconds(20));
  EXPECT_FALSE(eof.ok()) << "the daemon outlived its namespace";
}

TEST(ConfineSeccomp, TheFilterRefusesPtraceNamespacesMountsAndInternetSockets) {
  AK_REQUIRE_LAYER(ConfinementLayer::kSeccomp);
  auto bpf = candidate_seccomp_filter();
  ASSERT_TRUE(bpf.ok()) << bpf.status().message();
  Confinement c;  // the filter alone, so that nothing else explains a refusal
  c.seccomp_bpf = *bpf;
  Listener l;
  for (const std::vector<std::string>& args : {std::vector<std::string>{"ptrace", std::to_string(getpid())},
                                               {"unshare"},
                                               {"mount"},
                                               {"inet", std::to_string(l.port)},
                                               {"listen"}}) {
    const Outcome o = run_child(args, c);
    EXPECT_EQ(o.line, "denied Operation not permitted") << args[0];
  }
  const Outcome id = run_child({"id"}, c);
  EXPECT_NE(id.line.find("nnp 1 seccomp 2"), std::string::npos) << id.line;
  // Local sockets stay (a sandbox's runtime may use them); only the internet families are refused.
  EXPECT_FALSE(starts_with(run_child({"unix", "/nonexistent/socket"}, c).line, "denied Operation not permitted"));
}

TEST(ConfineCgroup, OnCgroupV2TheFarmsFolderEnablesTheControllersForItsGroups) {
  // A cgroup v2 tree whose root delegates memory and pids (as on a GPU host seen in 2026-12): the
  // farm's folder must enable them for the job groups under it, or their memory.max does not exist.
  char tmpl[] = "/tmp/ak-cgroup2-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string fs_root = tmpl;
  std::ofstream(fs_root + "/cgroup.controllers") << "cpu io memory pids\n";
  std::ofstream(fs_root + "/cgroup.subtree_control") << "memory pids\n";
  ProbeOptions o;
  o.cgroup_fs = fs_root;
  (void)probe_confinement(o);  // the limits cannot work on plain files; the delegation is what is tested
  std::ifstream in(fs_root + "/autokernel/cgroup.subtree_control");
  const std::string enabled((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(enabled.find("+memory"), std::string::npos) << enabled;
  EXPECT_NE(enabled.find("+pids"), std::string::npos) << enabled;
  std::filesystem::remove_all(fs_root);
}

TEST(ConfineCgroup, ThePidsLimitStopsAForkBombAndTheGroupIsRemovedWithItsTasks) {
  AK_REQUIRE_LAYER(ConfinementLayer::kCgroupPids);
  std::string dir;
  {
    auto group = CgroupJob::create(support(), "test-" + std::to_string(getpid()), 0, 32);
    ASSERT_TRUE(group.ok()) << group.status().message();
    ASSERT_EQ(group->dirs().size(), 1u);
    dir = group->dirs()[0];
    Confinement c = base();
    c.cgroups = group->dirs();
    const Outcome o = run_child({"forkbomb"}, c);
    EXPECT_TRUE(starts_with(o.line, "denied ")) << o.line;
    EXPECT_LT(std::atoi(o.line.substr(7).c_str()), 32) << o.line;
    // The bomb's children wait in pause(): the group still holds them until remove().
  }
  EXPECT_FALSE(fs::exists(dir)) << "the destructor kills the tasks and removes the group";
}

TEST(ConfineFailure, ABindWhoseSourceIsMissingIsRefusedBeforeFork) {
  Confinement c = base();
  c.mount_namespace = true;
  c.binds = {{"/nonexistent/ak-source", "/tmp/x", true}};
  const Outcome o = run_child({"id"}, c);
  EXPECT_FALSE(o.spawned.ok());
  EXPECT_NE(o.spawned.message().find("bind source /nonexistent/ak-source does not exist"), std::string::npos)
      << o.spawned.message();
}

TEST(ConfineFailure, AFailingStepInTheChildIsNamedInTheError) {
  AK_REQUIRE_LAYER(ConfinementLayer::kMountNamespace);
  Confinement c = base();
  c.mount_namespace = true;
  c.binds = {{"/etc", "/nonexistent-ak-parent/etc", true}};  // outside any private dir: no parent to bind into
  const Outcome o = run_child({"id"}, c);
  EXPECT_NE(o.spawned.message().find("cannot confine the child (make a bind target) for"), std::string::npos)
      << o.spawned.message();
  EXPECT_NE(o.spawned.message().find("No such file or directory"), std::string::npos) << o.spawned.message();
}

TEST(ConfinePolicy, ABindBelowAFolderTheChildsUserMayNotEnterIsReachedAndTheFolderHidden) {
  // As `autokernel run` in root's `mktemp -d` folder: the compile's work folder is bound for a
  // child that runs as another uid, below a 0700 folder of root's.
  if (geteuid() != 0) GTEST_SKIP() << "a non-root parent's child keeps its uid: every folder it made is its own";
  auto policy = make_confinement_policy(false, {});
  if (!policy.ok() || !policy->mount_namespace() || policy->child_uid() == 0)
    GTEST_SKIP() << "needs a mount namespace and the unprivileged user:\n" << support().table();
  const fs::path closed = fs::path("/var/tmp") / ("ak-closed-" + std::to_string(getpid()));
  fs::create_directories(closed / "work");
  std::ofstream(closed / "work" / "candidate.cc") << "artefact";
  std::ofstream(closed / "secret") << "secret";
  fs::permissions(closed, fs::perms::owner_all, fs::perm_options::replace);  // 0700, root's
  fs::permissions(closed / "work", fs::perms::all);
  fs::permissions(closed / "work" / "candidate.cc", fs::perms::all);
  fs::permissions(closed / "secret", fs::perms::all);
  ConfinementPolicy::ChildView view;
  view.binds = {{(closed / "work").string(), (closed / "work").string(), false}};
  const Confinement c = policy->for_child(view);
  EXPECT_TRUE(starts_with(run_child({"read", (closed / "work" / "candidate.cc").string()}, c).line, "ok 8 bytes"));
  EXPECT_TRUE(starts_with(run_child({"write", (closed / "work" / "out.so").string()}, c).line, "ok"));
  // The rest of the closed folder is not there: it is hidden, not opened up.
  EXPECT_TRUE(starts_with(run_child({"exists", (closed / "secret").string()}, c).line, "denied"));
  fs::remove_all(closed);
}

TEST(ConfinePolicy, AHiddenFolderInsideAnotherIsHiddenWithItAndTheChildStillStarts) {
  // A worker's state and cache folders under /root (a data dir there, as on a machine whose work
  // folder is /root/out), which the policy hides as well as /root itself: the inner ones do not
  // exist once /root's tmpfs is mounted, and mounting over them failed every child ("make a
  // hidden directory read-only ... No such file or directory").
  const fs::path state = fs::path("/root") / ("ak-nested-" + std::to_string(getpid())) / "state";
  std::error_code ec;
  fs::create_directories(state, ec);
  if (ec) GTEST_SKIP() << "cannot create " << state << ": " << ec.message();
  std::ofstream(state / "instance") << "secret";
  if (!support().sufficient() || !support().has(ConfinementLayer::kMountNamespace))
    GTEST_SKIP() << "needs a mount namespace:\n" << support().table();
  // make_confinement_policy spawns a child with every layer: it refused before.
  auto policy = make_confinement_policy(false, {state.string(), state.parent_path().string()});
  ASSERT_TRUE(policy.ok()) << policy.status().message();
  const Confinement c = policy->for_child();
  for (const std::string& h : c.hidden)
    EXPECT_FALSE(h != "/root" && h.rfind("/root/", 0) == 0) << h << " is inside the hidden /root";
  const Outcome id = run_child({"id"}, c);
  ASSERT_TRUE(id.spawned.ok()) << id.spawned.message();
  EXPECT_TRUE(starts_with(id.line, "ok uid")) << id.line;
  EXPECT_TRUE(starts_with(run_child({"exists", (state / "instance").string()}, c).line, "denied"));
  fs::remove_all(state.parent_path());
}

TEST(ConfinePolicy, EveryAvailableLayerTogetherStillRunsAProgram) {
  auto policy = make_confinement_policy(false, {});
  if (!support().sufficient()) {
    EXPECT_FALSE(policy.ok());
    return;
  }
  ASSERT_TRUE(policy.ok()) << policy.status().message();
  const Confinement c = policy->for_child();
  std::cout << c.describe() << "\n";
  const Outcome id = run_child({"id"}, c);
  ASSERT_TRUE(id.spawned.ok()) << id.spawned.message();
  EXPECT_TRUE(starts_with(id.line, "ok uid " + std::to_string(policy->child_uid()))) << id.line;
  // Hidden behind /dev/null where there is a mount namespace, unreadable for the unprivileged user.
  const std::string shadow = run_child({"read", "/etc/shadow"}, c).line;
  EXPECT_TRUE(starts_with(shadow, "denied") || shadow == "ok 0 bytes") << shadow;
}

}  // namespace
}  // namespace ak

namespace ak {
namespace {

TEST(ConfinePolicy, GroupsLeftByAWorkerThatDiedAreRemovedWhenTheNextPolicyIsMade) {
  if (!support().has(ConfinementLayer::kCgroupPids)) GTEST_SKIP() << "no pids cgroup here";
  // A pid that has just ended: a child that exited and was reaped.
  SpawnOptions o;
  o.null_stdin = true;
  auto child = ChildProcess::spawn({"true"}, o);
  ASSERT_TRUE(child.ok());
  child->wait();
  const std::string dead = support().pids_cgroup_root + "/sandbox-" + std::to_string(child->pid()) + "-0";
  const std::string alive = support().pids_cgroup_root + "/sandbox-" + std::to_string(getpid()) + "-test";
  ASSERT_EQ(mkdir(dead.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(alive.c_str(), 0755), 0);
  auto policy = make_confinement_policy(false, {});
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(alive)) << "a live worker's group stays";
  rmdir(alive.c_str());
}

}  // namespace
}  // namespace ak
