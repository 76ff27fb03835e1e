// WorkerAgent: the worker daemon for one device (one GPU, or the CPU).
//
// It owns a ZeroMQ DEALER socket (routing id = worker_id) connected to the coordinator's ROUTER
// and speaks the worker protocol (common/protocol.h):
//   - READY (capabilities + slots) at start, and again when the coordinator answers
//     ERROR UNKNOWN_WORKER (it restarted and forgot us) -- followed by a HEARTBEAT and a resend of
//     every unacknowledged result;
//   - HEARTBEAT every heartbeat_ms listing the jobs it holds (queued, compiling, compiled, running;
//     not results waiting for an ACK), which renews their leases;
//   - on JOB: queue it, unless its (job_id, attempt) is already held or waiting for an ACK
//     (a duplicate delivery, ignored);
//   - RESULT for each finished job, kept in the Outbox (worker/outbox.h, persisted under
//     state_dir) and resent with backoff until the coordinator's ACK removes it;
//   - on CANCEL_JOB (its campaign was cancelled): a job not yet begun (queued here, or waiting in
//     its runner to compile or to be measured) ends CANCELLED at once, a running KernelBench job's
//     harness step is killed and it reports CANCELLED; a job compiling ends CANCELLED when its
//     compile ends and is never measured; a sandbox run in progress finishes (bounded by the job's
//     timeout) and reports as usual;
//   - DISCONNECT on a clean stop.
//
// Jobs run through JobRunners (worker/job_runner.h), one per kind of job: kernel candidates through
// a SandboxJobRunner (compiled ahead on compile_threads threads, measured one at a time in the
// sandbox), KernelBench problems through a KernelBenchJobRunner. The agent holds one queue of the
// jobs it has not started and counts each runner's jobs: it starts the oldest queued job whose
// runner has a free slot (so a kind whose runner is busy never holds up another kind), forwards a
// CANCEL_JOB to the runner that holds the job, and completes every runner's result in one place
// (finish(): worker id, GPU, source hash, completion time) before the outbox takes it.
//
// Threads: the thread that calls run() is the only one that touches the socket, the outbox, the
// queue and the runners' methods. The runners' threads hand finished results to it through a queue
// and an eventfd that wakes its poll. No exception crosses a thread: a throwing compiler or runner
// becomes a CRASH result and a log line. A compile error becomes a COMPILE_ERROR result without
// touching the sandbox.
//
// Several agents (one per GPU) can run in one process or host; they share nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/confine.h"
#include "common/job.h"
#include "common/protocol.h"
#include "common/status.h"
#include "worker/compiler.h"
#include "worker/job_runner.h"
#include "worker/outbox.h"
#include "worker/stats.h"
#include "worker/supervisor.h"
#include "worker/worker_id.h"

namespace ak {

struct WorkerOptions {
  std::string coordinator_endpoint;  // e.g. "tcp://coordinator:5555"
  // CURVE (PROTOCOL.md, "Authentication"): the coordinator's public key and this worker's key pair,
  // Z85. All empty: no CURVE (a coordinator without keys, on loopback). A coordinator that does not
  // list curve_public_key refuses the handshake: the worker then never registers.
  std::string curve_server_key;
  std::string curve_public_key;
  std::string curve_secret_key;
  // Unique in the farm; empty: make_worker_agent picks "<hostname>-<backend><device>" and claims the
  // first free of it, it-2, it-3 ... in id_lock_dir (worker/worker_id.h).
  std::string worker_id;
  // Where make_worker_agent claims a default worker_id (worker/worker_id.h); empty:
  // kDefaultIdLockDir, host-wide. run() also claims worker_id in state_dir (when set), so that no
  // two live processes share an outbox, whatever their ids were given by.
  std::string id_lock_dir;
  Backend backend = Backend::kCpu;
  int device_index = 0;              // CUDA ordinal (ignored for cpu)
  int slots = 2;                     // jobs leased at once: one running, the rest compiling ahead
  std::string sandbox_path;          // autokernel-sandbox executable
  std::string sandbox_log;           // the sandbox's stderr, appended; empty: inherit ours
  std::vector<std::string> sandbox_env;  // "NAME=value" set for the sandbox (LD_LIBRARY_PATH to libtorch)
  std::string cache_dir;             // compiled artefacts
  std::string python = "python3";    // Python with triton, for the triton backend's compiler
  std::string state_dir;             // the outbox file; empty: the outbox lives in memory only
  int64_t heartbeat_ms = 500;
  int64_t resend_ms = 2'000;         // first resend of an unacknowledged result [ms]
  int64_t max_resend_ms = 30'000;    // resend backoff cap [ms]
  int compile_threads = 1;
  int64_t sandbox_start_timeout_ms = 60'000;
  int64_t poll_ms = 50;              // longest the main loop blocks before re-reading the clock [ms]
  int64_t linger_ms = 1'000;         // how long unsent messages may delay closing the socket [ms]
  // ZMTP heartbeats on the connection: a coordinator that answers none for this long counts as
  // unreachable (the connection is dropped and made again), as does a connect that takes longer [ms].
  int64_t link_timeout_ms = 3'000;
  // Without a connection to the coordinator this long, the agent logs a warning naming its
  // address, and again every unreachable_repeat_ms while it lasts (worker/coordinator_link.h) [ms].
  int64_t unreachable_warn_ms = 3'000;
  int64_t unreachable_repeat_ms = 15'000;
  // KernelBench jobs (JobSpec::kernelbench) skip the compiler and the sandbox: the
  // KernelBenchJobRunner runs them through KernelBenchRunners (worker/kernelbench_runner.h) with
  // `python`, in this folder (empty: <cache_dir>/kernelbench).
  std::string kernelbench_dir;
  // KernelBench jobs run at once, each on its own thread and runner (KernelBenchJobRunner). They share the GPU through
  // a lock file in kernelbench_dir (kernelbench/HARNESS.md, "Sharing a GPU"): loading, compiling and correctness
  // overlap, timing is exclusive. The slots announced are at least this many.
  int kernelbench_slots = 1;
  // Each KernelBench runner forks its harness steps from one process that imported torch once
  // (KernelBenchRunnerOptions::fork_server).
  bool kernelbench_fork_server = false;
  // How candidates are confined (common/confine.h): the sandbox, the KernelBench steps and the
  // compiles. The default confines nothing; `autokernel worker` probes and fills it.
  ConfinementPolicy confinement;
  // Counters and gauges for the worker's /metrics (worker/metrics.h), shared with the compile
  // runner and the sandbox supervisor; null: nothing is counted.
  std::shared_ptr<WorkerStats> stats;
};

class WorkerAgent {
 public:
  // `caps` is what READY announces (worker/device.h). The agent keeps a reference to `clock`
  // (which must outlive it) and owns its runners: here those of make_job_runners (the compiler and
  // the sandbox runner run kernel candidates).
  WorkerAgent(WorkerOptions options, Capabilities caps, Clock& clock, std::unique_ptr<Compiler> compiler,
              std::unique_ptr<SandboxRunner> runner);
  // Runs each job through the first of `runners` that accepts it; a job that none accepts ends
  // CRASH at once. The slots announced are at least each runner's slots().
  WorkerAgent(WorkerOptions options, Capabilities caps, Clock& clock, std::vector<std::unique_ptr<JobRunner>> runners);
  ~WorkerAgent();
  WorkerAgent(const WorkerAgent&) = delete;
  WorkerAgent& operator=(const WorkerAgent&) = delete;

  // Fails at once (kUnavailable) when another live process holds worker_id in state_dir. Every
  // message carries this installation's instance token (worker_instance(), kept in state_dir); when
  // the coordinator refuses the id as held by a live worker of another instance (ERROR
  // WORKER_ID_IN_USE naming ours) it stops as below, without DISCONNECT, and returns kInvalidArgument with
  // the coordinator's reason.
  // Serves until `stop` becomes true (checked at least every poll_ms), then stops taking work,
  // drops the jobs not yet begun (their leases expire), waits for the jobs in progress (a
  // measurement is bounded by its job's timeout_ms), sends their results and DISCONNECT, and returns
  // OK. Returns an error without serving if the endpoint is invalid or the outbox file cannot be
  // opened. Call once.
  Status run(std::atomic<bool>& stop);

  // Keeps `claim` (worker/worker_id.h) for the agent's life; its id becomes worker_id.
  // make_worker_agent hands over the claim of a default id this way.
  void keep_id_claim(WorkerIdClaim claim);

  const WorkerOptions& options() const { return options_; }
  const Capabilities& capabilities() const { return caps_; }

 private:
  using Key = std::pair<std::string, int>;
  struct Session;  // main-thread state of one run(): socket, outbox, held jobs, queue, timers
  struct Finished {
    Key key;
    std::optional<ResultRecord> result;  // nullopt: dropped without a result while stopping
  };

  // The one result path, from any thread: completes `r` (worker id, GPU, source hash, completion
  // time) and hands it to the main thread, which puts it in the outbox and sends it.
  void finish(const protocol::Job& job, std::string_view kind, std::optional<ResultRecord> r);
  void wake_main();
  // Main thread only.
  void send(Session& s, const protocol::Message& m);
  void send_ready(Session& s);
  void send_heartbeat(Session& s);
  void handle(Session& s, const protocol::Message& m);
  // Starts queued jobs, oldest first, whose runner has a free slot.
  void dispatch(Session& s);
  // CANCEL_JOB: a job still queued here ends CANCELLED at once; otherwise its runner decides
  // (JobRunner::cancel).
  void cancel(Session& s, const protocol::CancelJob& c);
  void drain_results(Session& s);
  // The socket monitor's events: the link to the coordinator up or down (CoordinatorLink).
  void read_link_events(Session& s);

  WorkerOptions options_;
  Capabilities caps_;
  Clock& clock_;
  std::vector<std::unique_ptr<JobRunner>> runners_;

  std::mutex mu_;                 // guards results_
  std::deque<Finished> results_;  // runners' threads -> main thread
  int wake_fd_ = -1;              // eventfd; runners' threads write, the main thread polls
  bool ran_ = false;
  WorkerIdClaim id_claim_;  // a default worker_id, held while the agent lives
};

// The runners of a worker, in the order the agent asks them: KernelBench problems
// (KernelBenchJobRunner, kernelbench_slots runners configured from `options`), then every other job
// through `compiler` and `sandbox` (SandboxJobRunner, compiling ahead on compile_threads threads,
// holding as many jobs as the agent announces slots). A new kind of job is one more runner here.
std::vector<std::unique_ptr<JobRunner>> make_job_runners(const WorkerOptions& options, const Capabilities& caps,
                                                         Clock& clock, std::unique_ptr<Compiler> compiler,
                                                         std::unique_ptr<SandboxRunner> sandbox);

// Assembles an agent from options alone: capabilities from the device (detect_gpus() for cuda,
// cpu_capabilities() for cpu), the real compiler, and a SandboxSupervisor whose first sandbox is
// started here so that a broken sandbox is reported before the worker registers. When worker_id is
// empty it claims the first free of default_worker_id(), -2, -3 ... in id_lock_dir (empty:
// kDefaultIdLockDir), preferring one whose outbox in state_dir holds results: a restarted worker
// takes back its predecessor's id and results, and two live workers on a host never share one.
Result<std::unique_ptr<WorkerAgent>> make_worker_agent(WorkerOptions options, Clock& clock);

// "<hostname>-cuda0", "<hostname>-cpu0".
std::string default_worker_id(const Capabilities& caps, Backend backend, int device_index);

// How many jobs an agent holds (slots) and on how many threads it compiles them ahead, where the
// worker's flags leave either at 0 (automatic). A cuda agent compiles on half of the host's hardware
// threads shared between the host's agents, at most 8 each: a study's candidates take seconds each
// to compile and a fraction of that to measure, so one compile thread leaves the GPU idle. A cpu
// agent compiles on one thread, so that compiling disturbs the timings on its cores as little as it
// can. Automatic slots are one more than the compile threads (one job measured while the others
// compile); given slots bound the automatic compile threads to one fewer.
struct AgentParallelism {
  int slots = 2;
  int compile_threads = 1;
};
AgentParallelism agent_parallelism(Backend backend, unsigned hardware_threads, size_t agents_on_host, int slots,
                                   int compile_threads);

}  // namespace ak
