#include "worker/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include <spdlog/spdlog.h>

#include "common/process.h"
#include "common/sigpipe.h"

namespace ak {
namespace {

namespace fs = std::filesystem;

using steady = std::chrono::steady_clock;

int remaining_ms(steady::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()).count();
  if (left <= 0) return 0;
  // Round up so that poll() never returns just before the deadline.
  return left > 1'000'000'000 ? 1'000'000'000 : static_cast<int>(left) + 1;
}

std::string errno_text(int err) { return std::string(std::strerror(err)); }

std::string describe_wait_status(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return "died with signal " + std::to_string(sig) + " (" + (name ? name : "unknown") + ")";
  }
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  return "ended with wait status " + std::to_string(status);
}

std::string shorten(const std::string& s, size_t n = 200) {
  return s.size() <= n ? s : s.substr(0, n) + "...";
}

SandboxReply failure(ResultStatus status, std::string reason) {
  SandboxReply r;
  r.status = status;
  r.stage = "sandbox";
  r.reason = std::move(reason);
  return r;
}

}  // namespace

SandboxSupervisor::SandboxSupervisor(SandboxOptions options) : options_(std::move(options)) {}

SandboxSupervisor::~SandboxSupervisor() { stop(); }

std::string SandboxSupervisor::reap(bool kill_first, int* wait_status) {
  if (!running()) return "was not running";
  // The whole group when killed: candidates may have started helpers of their own.
  if (kill_first || !child_.wait_for(options_.exit_grace)) child_.kill_group();
  const int status = child_.wait_status().value_or(0);
  child_ = ChildProcess();
  cgroup_.remove();  // what the candidate left in it goes too
  buffer_.clear();
  remove_tmp_dir();
  if (wait_status) *wait_status = status;
  return describe_wait_status(status);
}

void SandboxSupervisor::remove_tmp_dir() {
  if (tmp_dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(tmp_dir_, ec);
  if (ec) spdlog::warn("cannot remove the sandbox's temporary directory {}: {}", tmp_dir_, ec.message());
  tmp_dir_.clear();
}

void SandboxSupervisor::stop() {
  if (!running()) {
    buffer_.clear();
    remove_tmp_dir();
    return;
  }
  // EOF on stdin asks the sandbox to exit 0.
  child_.close_stdin();
  std::string how = reap(false);
  spdlog::debug("sandbox stopped: {}", how);
}

Status SandboxSupervisor::start() {
  if (running()) return Status::ok_status();
  // Named by this process's pid, so the next worker removes what a worker killed with SIGKILL left.
  remove_leftovers_of_dead_processes_once(options_.tmp_root, "ak-sandbox-");
  std::string tmpl = options_.tmp_root + "/ak-sandbox-" + std::to_string(getpid()) + "-XXXXXX";
  if (!mkdtemp(tmpl.data())) {
    int err = errno;
    return Status::unavailable("cannot create the sandbox's temporary directory under " + options_.tmp_root + ": " +
                               errno_text(err));
  }
  tmp_dir_ = tmpl;
  const ConfinementPolicy& policy = options_.confinement;
  const Confinement probe = policy.for_child();
  confined_ = probe.any();
  if (confined_) {
    // The child's own uid owns its temporary directory; the staged artefacts stay the worker's.
    std::error_code ec;
    fs::create_directories(fs::path(tmp_dir_) / "in", ec);
    fs::permissions(tmp_dir_,
                    fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                        fs::perms::others_exec,
                    ec);
    if (chown(tmp_dir_.c_str(), policy.child_uid(), policy.child_gid()) != 0) {
      const int err = errno;
      remove_tmp_dir();
      return Status::unavailable("cannot hand the sandbox's temporary directory to uid " +
                                 std::to_string(policy.child_uid()) + ": " + errno_text(err));
    }
    cgroup_ = policy.make_cgroup("sandbox-" + std::to_string(getpid()) + "-" + std::to_string(starts_));
  }
  ConfinementPolicy::ChildView view;
  view.binds = {{tmp_dir_, tmp_dir_, false}, {tmp_dir_ + "/in", tmp_dir_ + "/in", true}};
  view.needed = {options_.executable};
  view.cgroups = cgroup_.dirs();
  const Confinement confinement = policy.for_child(view);
  expected_descendants_ = confinement.pid_namespace ? 2 : 0;

  int64_t as_mb = options_.address_space_mb;
  if (as_mb < 0) as_mb = options_.backend == Backend::kCpu ? 16 * 1024 : 0;
  std::vector<std::string> args = {options_.executable, "--backend", backend_name(options_.backend),
                                   "--device", std::to_string(options_.device_index),
                                   "--limit-as-mb", std::to_string(as_mb),
                                   "--limit-nofile", std::to_string(options_.open_files)};
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());

  SpawnOptions o;
  o.pipe_stdin = true;
  o.capture_stdout = true;
  o.output_path = options_.stderr_path;  // stderr only: stdout is the protocol
  o.append_output = true;
  // Own process group, so a kill reaches the candidate's helpers too.
  o.new_process_group = true;
  o.inherit_env = false;
  o.keep_env = kept_env_names();
  // extra_env first: the private folders come after it and so always win (a later entry of the
  // same name replaces an earlier one), whatever extra_env carries (worker --inherit-env passes the
  // worker's whole environment, HOME and TMPDIR included).
  o.env = options_.extra_env;
  for (const char* name : {"TMPDIR", "HOME", "CUDA_CACHE_PATH"}) o.env.push_back(std::string(name) + "=" + tmp_dir_);
  o.env.push_back("TRITON_CACHE_DIR=" + tmp_dir_ + "/triton");
  o.confinement = confinement;
  // The sandbox arms PR_SET_PDEATHSIG(SIGKILL) itself first thing (worker/sandbox/main.cc); the
  // default death signal here also covers the moments before its main runs.
  auto child = ChildProcess::spawn(args, o);
  if (!child.ok()) {
    cgroup_.remove();
    remove_tmp_dir();
    return Status::unavailable("cannot start sandbox '" + options_.executable + "': " + child.status().message() +
                               "; check the sandbox path (--sandbox)");
  }
  child_ = std::move(*child);
  const pid_t pid = child_.pid();
  for (int fd : {child_.stdin_fd(), child_.stdout_fd()}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  ++starts_;
  if (starts_ > 1 && options_.stats) options_.stats->sandbox_restarts.fetch_add(1);
  hello_ = SandboxHello{};

  std::string line;
  auto deadline = steady::now() + options_.start_timeout;
  LineOutcome got;
  do {
    got = read_line(deadline, &line);
  } while (got == LineOutcome::kLine && line.empty());
  std::string what = "sandbox '" + options_.executable + "' (pid " + std::to_string(pid) + ")";
  switch (got) {
    case LineOutcome::kLine:
      break;
    case LineOutcome::kTimeout:
      reap(true);
      return Status::unavailable(what + " sent no hello within " +
                                 std::to_string(options_.start_timeout.count()) + " ms; killed");
    case LineOutcome::kEof:
      return Status::unavailable(what + " " + reap(false) + " before its hello; see its log");
    case LineOutcome::kTooLong:
    case LineOutcome::kError:
      reap(true);
      return Status::unavailable(what + " sent an unreadable hello; killed");
  }
  try {
    hello_ = nlohmann::json::parse(line).get<SandboxHello>();
  } catch (const std::exception& e) {
    reap(true);
    return Status::unavailable(what + " sent a hello that is not a SandboxHello (" + e.what() +
                               "): '" + shorten(line) + "'; killed");
  }
  if (!hello_.ready) {
    std::string err = hello_.error.empty() ? "no reason given" : hello_.error;
    stop();
    return Status::unavailable(what + " is not ready: " + err);
  }
  std::string gemm;
  for (const auto& [dtype, tflops] : hello_.ceilings.gemm_tflops)
    gemm += (gemm.empty() ? ", GEMM TFLOP/s " : " ") + dtype + " " + std::to_string(int(tflops + 0.5));
  if (starts_ == 1) spdlog::info("sandbox confinement: {}", confinement.describe());
  spdlog::info("sandbox pid {} ready: device '{}', copy bandwidth {:.1f} GB/s{}, datasheet {}, torch {}", pid,
               hello_.device, hello_.copy_bandwidth_gbps, gemm,
               hello_.ceilings.datasheet_name.empty() ? "none" : hello_.ceilings.datasheet_name, hello_.torch_version);
  return Status::ok_status();
}

SandboxSupervisor::LineOutcome SandboxSupervisor::read_line(steady::time_point deadline,
                                                            std::string* line) {
  char chunk[65536];
  for (;;) {
    auto nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      line->assign(buffer_, 0, nl);
      buffer_.erase(0, nl + 1);
      return LineOutcome::kLine;
    }
    if (buffer_.size() > options_.max_line_bytes) return LineOutcome::kTooLong;
    ssize_t n = read(child_.stdout_fd(), chunk, sizeof(chunk));
    if (n > 0) {
      buffer_.append(chunk, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) return LineOutcome::kEof;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return LineOutcome::kError;
    int wait = remaining_ms(deadline);
    if (wait == 0) return LineOutcome::kTimeout;
    pollfd p{child_.stdout_fd(), POLLIN, 0};
    int rc = poll(&p, 1, wait);
    if (rc < 0 && errno != EINTR) return LineOutcome::kError;
    // rc == 0: loop once more; the read sees EAGAIN and the deadline check ends it.
  }
}

Status SandboxSupervisor::write_all(const std::string& data, steady::time_point deadline) {
  SigpipeBlock block;  // a sandbox that has gone is an EPIPE error here, not the end of the worker
  Status result;
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(child_.stdin_fd(), data.data() + off, data.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int wait = remaining_ms(deadline);
      if (wait == 0) {
        result = Status::timed_out("sandbox did not read its request");
        break;
      }
      pollfd p{child_.stdin_fd(), POLLOUT, 0};
      poll(&p, 1, wait);
      continue;
    }
    result = Status::unavailable("writing to the sandbox failed: " + errno_text(errno));
    break;
  }
  return result;
}

bool SandboxSupervisor::exited_while_idle() {
  if (!running() || child_.running()) return false;
  spdlog::warn("sandbox pid {} {} between jobs; starting a fresh one", child_.pid(),
               describe_wait_status(child_.wait_status().value_or(0)));
  child_ = ChildProcess();
  cgroup_.remove();
  buffer_.clear();
  remove_tmp_dir();
  return true;
}

SandboxReply SandboxSupervisor::run(const SandboxRequest& request, std::chrono::milliseconds timeout) {
  const auto deadline = steady::now() + timeout;
  const std::string timeout_reason = "no reply within " + std::to_string(timeout.count()) + " ms; sandbox killed";
  // A sandbox that died between jobs is not this job's fault: it is replaced once, and the
  // request goes to the fresh one.
  bool gone = false;
  SandboxReply reply;
  for (int attempt = 0; attempt < 2 && (attempt == 0 || gone); ++attempt) {
    exited_while_idle();
    if (Status s = start(); !s.ok())
      return failure(ResultStatus::kCrash, "sandbox could not be started: " + s.message());
    std::string staged_dir;
    auto staged = stage(request, &staged_dir);
    if (!staged.ok()) return failure(ResultStatus::kCrash, staged.status().message());
    std::string line;
    try {
      line = nlohmann::json(*staged).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } catch (const std::exception& e) {
      return failure(ResultStatus::kCrash, std::string("cannot encode the sandbox request: ") + e.what());
    }
    line += '\n';
    reply = run_once(request, line, deadline, timeout_reason, &gone);
    if (!staged_dir.empty()) {
      std::error_code ec;
      fs::remove_all(staged_dir, ec);
    }
  }
  // Whatever the candidate started ends with its job: a sandbox whose tree or cgroup holds more
  // than itself is killed whole, and the next job starts a fresh one.
  if (running()) {
    if (const int stray = stray_processes(); stray > 0) {
      spdlog::warn("sandbox pid {} holds {} process(es) besides itself after job {}; killing its tree", child_.pid(),
                   stray, request.job.job_id);
      reap(true);
    }
  }
  return reply;
}

Result<SandboxRequest> SandboxSupervisor::stage(const SandboxRequest& request, std::string* staged_dir) {
  if (!confined_ || request.artifact_path.empty()) return request;
  const fs::path dir = fs::path(tmp_dir_) / "in" / std::to_string(staged_++);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::unavailable("cannot stage the artefact in " + dir.string() + ": " + ec.message());
  *staged_dir = dir.string();
  // The artefact and its siblings of the same stem (triton: <stem>.json, <stem>.div16.cubin, ...).
  const fs::path artefact(request.artifact_path);
  const std::string stem = artefact.stem().string();
  for (const auto& e : fs::directory_iterator(artefact.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name != artefact.filename().string() && name.rfind(stem + ".", 0) != 0) continue;
    std::error_code lc;
    fs::create_hard_link(e.path(), dir / name, lc);
    if (lc) fs::copy_file(e.path(), dir / name, lc);
    if (lc) return Status::unavailable("cannot stage " + e.path().string() + " for the sandbox: " + lc.message());
  }
  if (ec) return Status::unavailable("cannot read " + artefact.parent_path().string() + ": " + ec.message());
  SandboxRequest staged = request;
  staged.artifact_path = (dir / artefact.filename()).string();
  return staged;
}

int SandboxSupervisor::stray_processes() {
  // Every process below the sandbox's pid (children files of each thread, CONFIG_PROC_CHILDREN).
  int below = 0;
  std::vector<pid_t> todo = {child_.pid()};
  while (!todo.empty() && below < 100'000) {
    const pid_t pid = todo.back();
    todo.pop_back();
    std::error_code ec;
    for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
      std::ifstream in(task.path() / "children");
      long child = 0;
      while (in >> child) {
        todo.push_back(static_cast<pid_t>(child));
        ++below;
      }
    }
  }
  int stray = std::max(0, below - expected_descendants_);
  // Those that left the tree (double fork without a pid namespace) are still in the cgroup.
  for (const std::string& dir : cgroup_.dirs()) {
    std::ifstream in(dir + "/cgroup.procs");
    long pid = 0;
    int n = 0;
    while (in >> pid) ++n;
    stray = std::max(stray, n - 1 - expected_descendants_);
  }
  return stray;
}

SandboxReply SandboxSupervisor::run_once(const SandboxRequest& request, const std::string& request_line,
                                         steady::time_point deadline, const std::string& timeout_reason,
                                         bool* gone) {
  const bool first = !*gone;
  *gone = false;
  const pid_t pid = child_.pid();
  if (Status written = write_all(request_line, deadline); !written.ok()) {
    if (written.code() == StatusCode::kTimedOut) {
      reap(true);
      return failure(ResultStatus::kTimeout, timeout_reason);
    }
    std::string how = reap(false);
    spdlog::warn("sandbox pid {} {} before reading the request of job {}", pid, how, request.job.job_id);
    *gone = first;
    return failure(ResultStatus::kCrash, "sandbox " + how + " before reading its request");
  }
  // Progress lines name the stage the request is in; a sandbox that hangs or dies is reported
  // with the last one (stage "sandbox" when none came).
  std::string stage;
  auto in_stage = [&](SandboxReply r) {
    if (!stage.empty()) {
      r.stage = stage;
      r.reason += " (during " + stage + ")";
    }
    return r;
  };
  std::string line;
  for (;;) {
    LineOutcome got = read_line(deadline, &line);
    switch (got) {
      case LineOutcome::kLine:
        break;
      case LineOutcome::kTimeout:
        spdlog::warn("sandbox pid {}: {} (job {}, stage {})", pid, timeout_reason, request.job.job_id,
                     stage.empty() ? "none" : stage);
        reap(true);
        return in_stage(failure(ResultStatus::kTimeout, timeout_reason));
      case LineOutcome::kEof: {
        int status = 0;
        std::string how = reap(false, &status);
        spdlog::warn("sandbox pid {} {} while running job {}", pid, how, request.job.job_id);
        // Exit code 0 is the sandbox's answer to EOF on stdin, never to a request: it was on its
        // way out before this request reached it (unless it already reported progress on it).
        *gone = first && stage.empty() && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        return in_stage(failure(ResultStatus::kCrash, "sandbox " + how));
      }
      case LineOutcome::kTooLong:
        reap(true);
        return failure(ResultStatus::kCrash, "sandbox reply exceeds " + std::to_string(options_.max_line_bytes) +
                                                 " bytes (protocol violation); sandbox killed");
      case LineOutcome::kError: {
        int err = errno;
        reap(true);
        return failure(ResultStatus::kCrash,
                       "reading the sandbox reply failed: " + errno_text(err) + "; sandbox killed");
      }
    }
    if (line.empty()) continue;
    if (line.rfind("{\"progress\"", 0) == 0) {
      try {
        stage = nlohmann::json::parse(line).at("progress").get<std::string>();
        continue;
      } catch (const std::exception&) {
        // not a progress line after all: parsed as a reply below
      }
    }
    break;
  }
  try {
    SandboxReply reply = nlohmann::json::parse(line).get<SandboxReply>();
    // A CRASH reply (sticky CUDA error) is the sandbox's last: it exits right after it. Reap it
    // now so that the next job starts a fresh sandbox instead of finding this one dead.
    if (reply.status == ResultStatus::kCrash) {
      std::string how = reap(false);
      spdlog::info("sandbox pid {} reported CRASH for job {} and {}", pid, request.job.job_id, how);
    }
    return reply;
  } catch (const std::exception& e) {
    reap(true);
    spdlog::warn("sandbox pid {} broke the protocol: {}", pid, shorten(line));
    return failure(ResultStatus::kCrash, std::string("sandbox sent an unreadable reply (protocol violation: ") +
                                             e.what() + "): '" + shorten(line) + "'; sandbox killed");
  }
}

}  // namespace ak
