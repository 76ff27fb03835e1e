#include "worker/agent.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <type_traits>

#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include "common/hash.h"
#include "worker/device.h"

namespace ak {
namespace {

// A file name from a worker id ("host/gpu:0" -> "host_gpu_0").
std::string file_safe(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) c = '_';
  return out.empty() ? "worker" : out;
}

}  // namespace

struct WorkerAgent::Session {
  explicit Session(const WorkerOptions& o)
      : outbox(OutboxOptions{o.resend_ms, o.max_resend_ms,
                             o.state_dir.empty() ? std::string()
                                                 : o.state_dir + "/outbox-" + file_safe(o.worker_id) + ".jsonl",
                             false}),
        socket(context, zmq::socket_type::dealer) {}
  Outbox outbox;
  zmq::context_t context{1};
  zmq::socket_t socket;
  std::set<Key> held;  // jobs received and not yet finished
  int64_t next_heartbeat_ms = 0;
  int64_t last_ready_ms = 0;
  bool stopping = false;
};

WorkerAgent::WorkerAgent(WorkerOptions options, Capabilities caps, Clock& clock,
                         std::unique_ptr<Compiler> compiler, std::unique_ptr<SandboxRunner> runner)
    : options_(std::move(options)),
      caps_(std::move(caps)),
      clock_(clock),
      compiler_(std::move(compiler)),
      runner_(std::move(runner)) {
  options_.kernelbench_slots = std::max(1, options_.kernelbench_slots);
  options_.slots = std::max({1, options_.slots, options_.kernelbench_slots});
  const std::string kb_dir =
      !options_.kernelbench_dir.empty()
          ? options_.kernelbench_dir
          : (options_.cache_dir.empty() ? std::string("/tmp/ak-kernelbench") : options_.cache_dir + "/kernelbench");
  const bool cuda = options_.backend != Backend::kCpu;
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 0; i < options_.kernelbench_slots; ++i)
    kernelbench_.push_back(std::make_unique<KernelBenchRunner>(KernelBenchRunnerOptions{
        options_.python, kb_dir, cuda ? "cuda:" + std::to_string(options_.device_index) : std::string("cpu"), false,
        // One lock per GPU for every slot of every agent that shares the folder.
        cuda ? kb_dir + "/gpu" + std::to_string(options_.device_index) + ".lock" : std::string(),
        // torch.compile's worker pools share the cores between the slots.
        options_.kernelbench_slots > 1
            ? static_cast<int>(std::max(1u, cpus / static_cast<unsigned>(options_.kernelbench_slots)))
            : 0,
        options_.kernelbench_fork_server}));
  options_.compile_threads = std::max(1, options_.compile_threads);
  options_.heartbeat_ms = std::max<int64_t>(1, options_.heartbeat_ms);
  options_.poll_ms = std::max<int64_t>(1, options_.poll_ms);
}

WorkerAgent::~WorkerAgent() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  compile_cv_.notify_all();
  run_cv_.notify_all();
  kernelbench_cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  if (wake_fd_ >= 0) close(wake_fd_);
}

ResultRecord WorkerAgent::base_result(const protocol::Job& job) const {
  ResultRecord r;
  r.job_id = job.spec.job_id;
  r.attempt = job.attempt;
  r.worker_id = options_.worker_id;
  r.gpu = caps_.gpu_name;
  r.source_hash = xxh64_hex(job.spec.source);
  return r;
}

void WorkerAgent::wake_main() {
  uint64_t one = 1;
  ssize_t n = write(wake_fd_, &one, sizeof(one));
  (void)n;  // the counter cannot overflow in practice; a failed wake only delays by poll_ms
}

void WorkerAgent::push_result(ResultRecord r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    results_.push_back(std::move(r));
  }
  wake_main();
}

void WorkerAgent::compile_loop() {
  for (;;) {
    protocol::Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      compile_cv_.wait(lock, [&] { return shutdown_ || !compile_queue_.empty(); });
      if (shutdown_) break;
      job = std::move(compile_queue_.front());
      compile_queue_.pop_front();
    }
    const int64_t t0 = clock_.now_ms();
    std::optional<Result<CompiledArtifact>> art;
    std::string crash;
    try {
      art.emplace(compiler_->compile(job.spec, caps_));
    } catch (const std::exception& e) {
      crash = std::string("compiler threw: ") + e.what();
    } catch (...) {
      crash = "compiler threw a non-standard exception";
    }
    if (art && art->ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (take_cancelled(job)) {  // cancelled while it compiled: no measurement
        results_.push_back(cancelled_result(job, "compile"));
        wake_main();
        continue;
      }
      run_queue_.push_back(Compiled{std::move(job), std::move(art->value())});
      run_cv_.notify_one();
      continue;
    }
    ResultRecord r = base_result(job);
    r.stage = "compile";
    r.m.compile_ms = static_cast<double>(clock_.now_ms() - t0);
    if (!crash.empty()) {
      r.status = ResultStatus::kCrash;
      r.reason = crash;
      spdlog::error("worker {}: job {} attempt {}: {}", options_.worker_id, job.spec.job_id, job.attempt, crash);
    } else if (art->status().code() == StatusCode::kInvalidArgument) {
      r.status = ResultStatus::kCompileError;
      r.reason = art->status().message();
    } else {
      // Not the candidate's fault (cache directory, missing toolchain ...): report it as such.
      r.status = ResultStatus::kCrash;
      r.reason = "compiler failed: " + art->status().to_string();
      spdlog::error("worker {}: job {}: {}", options_.worker_id, job.spec.job_id, r.reason);
    }
    r.completed_wall_ms = clock_.wall_ms();
    push_result(std::move(r));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    --threads_alive_;
  }
  wake_main();
}

void WorkerAgent::execute_loop() {
  for (;;) {
    Compiled c;
    {
      std::unique_lock<std::mutex> lock(mu_);
      run_cv_.wait(lock, [&] { return shutdown_ || !run_queue_.empty(); });
      if (shutdown_) break;
      c = std::move(run_queue_.front());
      run_queue_.pop_front();
    }
    SandboxRequest req;
    req.job = c.job.spec;
    req.artifact_path = c.artifact.path;
    req.entry = c.artifact.entry;
    req.compile_ms = c.artifact.compile_ms;
    SandboxReply reply;
    try {
      reply = runner_->run(req, std::chrono::milliseconds(std::max<int64_t>(1, c.job.spec.timeout_ms)));
    } catch (const std::exception& e) {
      reply = SandboxReply{ResultStatus::kCrash, "sandbox", std::string("sandbox runner threw: ") + e.what(), {}};
    } catch (...) {
      reply = SandboxReply{ResultStatus::kCrash, "sandbox", "sandbox runner threw a non-standard exception", {}};
    }
    ResultRecord r = base_result(c.job);
    r.status = reply.status;
    r.stage = reply.stage;
    r.reason = reply.reason;
    r.m = reply.m;
    r.m.compile_ms = c.artifact.compile_ms;
    if (!c.artifact.source_hash.empty()) r.source_hash = c.artifact.source_hash;
    r.options_hash = c.artifact.options_hash;
    r.completed_wall_ms = clock_.wall_ms();
    if (r.status != ResultStatus::kPass)
      spdlog::info("worker {}: job {} attempt {}: {} at {}: {}", options_.worker_id, r.job_id, r.attempt,
                   result_status_name(r.status), r.stage, r.reason);
    push_result(std::move(r));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    --threads_alive_;
  }
  wake_main();
}

void WorkerAgent::kernelbench_loop(KernelBenchRunner& runner) {
  for (;;) {
    protocol::Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      kernelbench_cv_.wait(lock, [&] { return shutdown_ || !kernelbench_queue_.empty(); });
      if (shutdown_) break;
      job = std::move(kernelbench_queue_.front());
      kernelbench_queue_.pop_front();
      runner.claim(job.spec.job_id);  // under mu_: a CANCEL_JOB finds it in the queue or here
    }
    KernelBenchOutcome o;
    try {
      o = runner.run(job.spec, std::chrono::milliseconds(std::max<int64_t>(1, job.spec.timeout_ms)));
    } catch (const std::exception& e) {
      o.status = ResultStatus::kCrash;
      o.stage = "kernelbench";
      o.reason = std::string("KernelBench runner threw: ") + e.what();
    }
    ResultRecord r = base_result(job);
    r.status = o.status;
    r.stage = o.stage;
    r.reason = o.reason;
    r.m = o.m;
    r.kernelbench = std::move(o.kernelbench);
    r.completed_wall_ms = clock_.wall_ms();
    if (r.status != ResultStatus::kPass)
      spdlog::info("worker {}: KernelBench job {} attempt {}: {} at {}: {}", options_.worker_id, r.job_id, r.attempt,
                   result_status_name(r.status), r.stage, r.reason);
    push_result(std::move(r));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    --threads_alive_;
  }
  wake_main();
}

void WorkerAgent::send(Session& s, const protocol::Message& m) {
  try {
    std::string frame = protocol::encode(m);
    auto sent = s.socket.send(zmq::buffer(frame), zmq::send_flags::dontwait);
    if (!sent) spdlog::warn("worker {}: {} not sent (send queue full)", options_.worker_id, protocol::type_name(m));
  } catch (const std::exception& e) {
    spdlog::error("worker {}: sending {} failed: {}", options_.worker_id, protocol::type_name(m), e.what());
  }
}

void WorkerAgent::send_ready(Session& s) {
  send(s, protocol::Ready{options_.worker_id, caps_, options_.slots});
  s.last_ready_ms = clock_.now_ms();
}

void WorkerAgent::send_heartbeat(Session& s) {
  protocol::Heartbeat hb;
  hb.worker_id = options_.worker_id;
  for (const auto& [id, attempt] : s.held) hb.in_flight.push_back({id, attempt});
  send(s, hb);
  s.next_heartbeat_ms = clock_.now_ms() + options_.heartbeat_ms;
}

void WorkerAgent::drain_results(Session& s) {
  std::deque<ResultRecord> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done.swap(results_);
  }
  const int64_t now = clock_.now_ms();
  for (auto& r : done) {
    s.held.erase(Key{r.job_id, r.attempt});
    if (Status st = s.outbox.add(r, now); !st.ok())
      spdlog::error("worker {}: result of job {} kept in memory only: {}", options_.worker_id, r.job_id, st.message());
    send(s, protocol::ResultMsg{options_.worker_id, r});
  }
}

void WorkerAgent::handle(Session& s, const protocol::Message& m) {
  const int64_t now = clock_.now_ms();
  if (const auto* job = std::get_if<protocol::Job>(&m)) {
    Key key{job->spec.job_id, job->attempt};
    if (s.stopping) {
      spdlog::info("worker {}: stopping; job {} not taken", options_.worker_id, key.first);
      return;
    }
    if (s.held.count(key) || s.outbox.contains(key.first, key.second)) {
      spdlog::info("worker {}: duplicate delivery of job {} attempt {} ignored", options_.worker_id, key.first,
                   key.second);
      return;
    }
    if (static_cast<int>(s.held.size()) >= options_.slots)
      spdlog::warn("worker {}: job {} exceeds the {} slot(s) announced; queued anyway", options_.worker_id,
                   key.first, options_.slots);
    s.held.insert(key);
    // KernelBench jobs skip the compiler: the harness compiles (load_inline, Triton) in its own process.
    const bool kb = job->spec.kernelbench.has_value();
    {
      std::lock_guard<std::mutex> lock(mu_);
      (kb ? kernelbench_queue_ : compile_queue_).push_back(*job);
    }
    (kb ? kernelbench_cv_ : compile_cv_).notify_one();
  } else if (const auto* ack = std::get_if<protocol::Ack>(&m)) {
    if (!s.outbox.ack(ack->job_id, ack->attempt))
      spdlog::debug("worker {}: ACK for job {} attempt {} not in the outbox", options_.worker_id, ack->job_id,
                    ack->attempt);
  } else if (const auto* c = std::get_if<protocol::CancelJob>(&m)) {
    cancel(*c);
  } else if (const auto* err = std::get_if<protocol::Error>(&m)) {
    if (err->code == protocol::ErrorCode::kUnknownWorker) {
      // Every message sent before the coordinator saw the new READY draws this error; one
      // re-registration per heartbeat interval is enough.
      if (now - s.last_ready_ms < options_.heartbeat_ms) return;
      spdlog::warn("worker {}: coordinator does not know us ({}); registering again and resending {} result(s)",
                   options_.worker_id, err->message, s.outbox.size());
      send_ready(s);
      send_heartbeat(s);
      for (const auto& r : s.outbox.all()) send(s, protocol::ResultMsg{options_.worker_id, r});
      s.outbox.restart_backoff(now);
    } else {
      spdlog::warn("worker {}: coordinator replied {}: {}", options_.worker_id, protocol::error_code_name(err->code),
                   err->message);
    }
  } else {
    spdlog::warn("worker {}: unexpected {} from the coordinator ignored", options_.worker_id, protocol::type_name(m));
  }
}

ResultRecord WorkerAgent::cancelled_result(const protocol::Job& job, const std::string& stage) const {
  ResultRecord r = base_result(job);
  r.status = ResultStatus::kCancelled;
  r.stage = stage;
  r.reason = "its campaign was cancelled before it was measured";
  r.completed_wall_ms = clock_.wall_ms();
  return r;
}

bool WorkerAgent::take_cancelled(const protocol::Job& job) {
  return cancelled_jobs_.erase(Key{job.spec.job_id, job.attempt}) > 0;
}

void WorkerAgent::cancel(const protocol::CancelJob& c) {
  std::lock_guard<std::mutex> lock(mu_);
  auto drop = [&](auto& queue, auto job_of) {
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      const protocol::Job& job = job_of(*it);
      if (job.spec.job_id == c.job_id && job.attempt == c.attempt) {
        results_.push_back(cancelled_result(job, "worker"));
        queue.erase(it);
        return true;
      }
    }
    return false;
  };
  const auto self = [](const protocol::Job& j) -> const protocol::Job& { return j; };
  if (drop(kernelbench_queue_, self) || drop(compile_queue_, self) ||
      drop(run_queue_, [](const Compiled& x) -> const protocol::Job& { return x.job; })) {
    spdlog::info("worker {}: job {} attempt {} cancelled before it started", options_.worker_id, c.job_id, c.attempt);
  } else if (std::any_of(kernelbench_.begin(), kernelbench_.end(), [&](auto& r) { return r->cancel(c.job_id); })) {
    spdlog::info("worker {}: KernelBench job {} cancelled: its step is killed", options_.worker_id, c.job_id);
  } else if (cancelled_jobs_.insert(Key{c.job_id, c.attempt}).second) {
    // Compiling (it ends CANCELLED instead of being measured), in the sandbox (bounded by its
    // timeout) or finished: the result goes as usual. Repeats of the message change nothing.
    spdlog::info("worker {}: job {} attempt {} cancelled; a measurement in progress finishes and reports",
                 options_.worker_id, c.job_id, c.attempt);
  }
  if (!results_.empty()) wake_main();
}

Status WorkerAgent::run(std::atomic<bool>& stop) {
  if (!threads_.empty() || wake_fd_ >= 0) return Status::invalid("WorkerAgent::run called twice");
  if (options_.worker_id.empty()) return Status::invalid("worker_id is empty; give every worker a unique id");
  if (!options_.state_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options_.state_dir, ec);
    if (ec)
      return Status::unavailable("cannot create state directory " + options_.state_dir + ": " + ec.message());
  }
  Session s(options_);
  if (Status st = s.outbox.open(clock_.now_ms()); !st.ok()) return st;
  try {
    s.socket.set(zmq::sockopt::routing_id, options_.worker_id);
    s.socket.set(zmq::sockopt::linger, static_cast<int>(options_.linger_ms));
    s.socket.set(zmq::sockopt::reconnect_ivl_max, 2000);
    s.socket.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(protocol::kMaxFrameBytes));
    s.socket.connect(options_.coordinator_endpoint);
  } catch (const zmq::error_t& e) {
    return Status::invalid("cannot connect to coordinator '" + options_.coordinator_endpoint + "': " + e.what() +
                           "; expected an endpoint like tcp://host:5555");
  }
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return Status::internal("eventfd failed");

  {
    std::lock_guard<std::mutex> lock(mu_);
    threads_alive_ = options_.compile_threads + 1 + static_cast<int>(kernelbench_.size());
  }
  for (int i = 0; i < options_.compile_threads; ++i) threads_.emplace_back([this] { compile_loop(); });
  threads_.emplace_back([this] { execute_loop(); });
  for (auto& kb : kernelbench_) threads_.emplace_back([this, r = kb.get()] { kernelbench_loop(*r); });

  spdlog::info("worker {}: {} ({}), {} slot(s), coordinator {}", options_.worker_id, caps_.gpu_name,
               backend_name(options_.backend), options_.slots, options_.coordinator_endpoint);
  send_ready(s);
  s.next_heartbeat_ms = clock_.now_ms() + options_.heartbeat_ms;

  for (;;) {
    if (!s.stopping && stop.load()) {
      // Stop taking work; keep heartbeating and delivering until the work in progress is done.
      s.stopping = true;
      std::lock_guard<std::mutex> lock(mu_);
      shutdown_ = true;
      for (const auto& j : compile_queue_) s.held.erase(Key{j.spec.job_id, j.attempt});
      compile_queue_.clear();
      for (const auto& c : run_queue_) s.held.erase(Key{c.job.spec.job_id, c.job.attempt});
      run_queue_.clear();
      for (const auto& j : kernelbench_queue_) s.held.erase(Key{j.spec.job_id, j.attempt});
      kernelbench_queue_.clear();
      kernelbench_cv_.notify_all();
      compile_cv_.notify_all();
      run_cv_.notify_all();
    }
    drain_results(s);
    if (s.stopping) {
      std::lock_guard<std::mutex> lock(mu_);
      if (threads_alive_ == 0 && results_.empty()) break;
    }
    const int64_t now = clock_.now_ms();
    for (const auto& r : s.outbox.due(now)) send(s, protocol::ResultMsg{options_.worker_id, r});
    if (now >= s.next_heartbeat_ms) send_heartbeat(s);

    int64_t wait_ms = std::min(options_.poll_ms, s.next_heartbeat_ms - now);
    if (auto due = s.outbox.next_due_ms()) wait_ms = std::min(wait_ms, *due - now);
    wait_ms = std::max<int64_t>(0, wait_ms);
    zmq::pollitem_t items[] = {{s.socket.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(wait_ms));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) spdlog::error("worker {}: poll failed: {}", options_.worker_id, e.what());
      continue;
    }
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t count;
      ssize_t n = read(wake_fd_, &count, sizeof(count));
      (void)n;
    }
    if (items[0].revents & ZMQ_POLLIN) {
      for (;;) {
        zmq::message_t frame;
        zmq::recv_result_t got;
        try {
          got = s.socket.recv(frame, zmq::recv_flags::dontwait);
        } catch (const zmq::error_t& e) {
          spdlog::error("worker {}: receive failed: {}", options_.worker_id, e.what());
          break;
        }
        if (!got) break;
        auto decoded = protocol::decode(frame.to_string_view());
        if (!decoded.ok()) {
          spdlog::warn("worker {}: unreadable message from the coordinator ignored: {}", options_.worker_id,
                       decoded.error.message);
          continue;
        }
        try {
          handle(s, *decoded.message);
        } catch (const std::exception& e) {
          spdlog::error("worker {}: handling {} failed: {}", options_.worker_id,
                        protocol::type_name(*decoded.message), e.what());
        }
      }
    }
  }

  for (auto& t : threads_) t.join();
  threads_.clear();
  send(s, protocol::Disconnect{options_.worker_id, "worker stopping"});
  spdlog::info("worker {}: stopped; {} result(s) not yet acknowledged", options_.worker_id, s.outbox.size());
  return Status::ok_status();
}

std::string default_worker_id(const Capabilities& caps, Backend backend, int device_index) {
  return (caps.hostname.empty() ? local_hostname() : caps.hostname) + "-" + backend_name(backend) +
         std::to_string(backend == Backend::kCpu ? 0 : device_index);
}

Result<std::unique_ptr<WorkerAgent>> make_worker_agent(WorkerOptions options, Clock& clock) {
  Capabilities caps;
  if (options.backend == Backend::kCuda) {
    auto gpus = detect_gpus();
    if (!gpus.ok()) return gpus.status();
    if (options.device_index < 0 || options.device_index >= static_cast<int>(gpus->size()))
      return Status::invalid("device " + std::to_string(options.device_index) + " does not exist; this machine has " +
                             std::to_string(gpus->size()) + " CUDA device(s)");
    caps = (*gpus)[static_cast<size_t>(options.device_index)];
  } else {
    caps = cpu_capabilities();
    options.device_index = 0;
  }
  if (options.worker_id.empty()) options.worker_id = default_worker_id(caps, options.backend, options.device_index);
  if (options.sandbox_path.empty()) return Status::invalid("no sandbox executable given (sandbox_path)");

  CompilerOptions copt;
  copt.cache_dir = options.cache_dir;
  copt.python = options.python;
  auto compiler = make_compiler(copt);
  if (!compiler) return Status::internal("make_compiler returned no compiler");

  SandboxOptions sopt;
  sopt.executable = options.sandbox_path;
  sopt.backend = options.backend;
  sopt.device_index = options.device_index;
  sopt.stderr_path = options.sandbox_log;
  sopt.start_timeout = std::chrono::milliseconds(options.sandbox_start_timeout_ms);
  auto supervisor = std::make_unique<SandboxSupervisor>(sopt);
  if (Status st = supervisor->start(); !st.ok()) return st;
  // The sandbox's calibration (and datasheet match) is what the worker announces as its ceilings.
  caps.ceilings = supervisor->hello().ceilings;
  if (caps.ceilings.copy_bandwidth_gbps <= 0) caps.ceilings.copy_bandwidth_gbps = supervisor->hello().copy_bandwidth_gbps;
  if (!supervisor->hello().torch_version.empty()) caps.versions["torch"] = supervisor->hello().torch_version;

  return std::make_unique<WorkerAgent>(std::move(options), std::move(caps), clock, std::move(compiler),
                                       std::move(supervisor));
}

}  // namespace ak
