#include "worker/agent.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include "common/hash.h"
#include "worker/coordinator_link.h"
#include "worker/device.h"
#include "worker/kernelbench_job_runner.h"
#include "worker/model_job_runner.h"
#include "worker/sandbox_job_runner.h"

namespace ak {

struct WorkerAgent::Session {
  Session(const WorkerOptions& o, size_t runners, int64_t now_ms)
      : outbox(OutboxOptions{o.resend_ms, o.max_resend_ms,
                             o.state_dir.empty() ? std::string() : outbox_path(o.state_dir, o.worker_id), false}),
        socket(context, zmq::socket_type::dealer),
        monitor(context, zmq::socket_type::pair),
        link(o.coordinator_endpoint, {o.unreachable_warn_ms, o.unreachable_repeat_ms}, now_ms),
        busy(runners, 0) {}
  struct Queued {
    protocol::Job job;
    size_t runner;  // index in runners_ of the runner that accepted it
  };
  Outbox outbox;
  zmq::context_t context{1};
  zmq::socket_t socket;
  zmq::socket_t monitor;  // the socket's connection events (zmq_socket_monitor)
  CoordinatorLink link;
  std::set<Key> held;             // jobs received and not yet finished (what heartbeats list)
  std::deque<Queued> queue;       // held, not yet started, oldest first
  std::map<Key, size_t> started;  // held, given to runners_[i], result not yet drained
  std::vector<int> busy;          // per runner: its jobs in `started`
  int64_t next_heartbeat_ms = 0;
  int64_t last_ready_ms = 0;
  bool stopping = false;
  // This installation's token (worker_instance()), in every message.
  std::string instance;
  // Not ok once the coordinator refused this worker's id as held by another instance: the agent
  // stops and run() returns it.
  Status refused;
};

std::vector<std::unique_ptr<JobRunner>> make_job_runners(const WorkerOptions& options, const Capabilities& caps,
                                                         Clock& clock, std::unique_ptr<Compiler> compiler,
                                                         std::unique_ptr<SandboxRunner> sandbox) {
  const int kb_slots = std::max(1, options.kernelbench_slots);
  const std::string kb_dir =
      !options.kernelbench_dir.empty()
          ? options.kernelbench_dir
          : (options.cache_dir.empty() ? std::string("/tmp/ak-kernelbench") : options.cache_dir + "/kernelbench");
  const bool cuda = options.backend != Backend::kCpu;
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  KernelBenchJobRunnerOptions kb;
  kb.slots = kb_slots;
  kb.runner = KernelBenchRunnerOptions{
      options.python, kb_dir, cuda ? "cuda:" + std::to_string(options.device_index) : std::string("cpu"), false,
      // One lock per GPU for every slot of every agent that shares the folder.
      cuda ? kb_dir + "/gpu" + std::to_string(options.device_index) + ".lock" : std::string(),
      // torch.compile's worker pools share the cores between the slots.
      kb_slots > 1 ? static_cast<int>(std::max(1u, cpus / static_cast<unsigned>(kb_slots))) : 0,
      options.kernelbench_fork_server, options.confinement};

  // Every job the agent holds may be a kernel candidate: compiling ahead is bounded by the slots.
  SandboxJobRunnerOptions so;
  so.slots = std::max({1, options.slots, kb_slots});
  so.compile_threads = options.compile_threads;
  so.worker_id = options.worker_id;
  so.stats = options.stats;

  ModelJobRunnerOptions mo;
  mo.python = options.python;
  mo.work_dir = options.cache_dir.empty() ? std::string("/tmp/ak-models") : options.cache_dir + "/models";
  mo.device = cuda ? "cuda:" + std::to_string(options.device_index) : std::string("cpu");
  mo.ceilings = caps.ceilings;
  mo.confinement = options.confinement;
  mo.backend = options.backend;
  mo.caps = caps;
  mo.compiler.cache_dir = options.cache_dir.empty() ? std::string("/tmp/ak-cache") : options.cache_dir;
  mo.compiler.python = options.python;
  mo.compiler.confinement = options.confinement;

  std::vector<std::unique_ptr<JobRunner>> runners;
  runners.push_back(std::make_unique<KernelBenchJobRunner>(std::move(kb)));
  runners.push_back(std::make_unique<ModelJobRunner>(std::move(mo)));
  runners.push_back(std::make_unique<SandboxJobRunner>(so, caps, clock, std::move(compiler), std::move(sandbox)));
  return runners;
}

WorkerAgent::WorkerAgent(WorkerOptions options, Capabilities caps, Clock& clock, std::unique_ptr<Compiler> compiler,
                         std::unique_ptr<SandboxRunner> runner)
    : WorkerAgent(options, caps, clock,
                  make_job_runners(options, caps, clock, std::move(compiler), std::move(runner))) {}

WorkerAgent::WorkerAgent(WorkerOptions options, Capabilities caps, Clock& clock,
                         std::vector<std::unique_ptr<JobRunner>> runners)
    : options_(std::move(options)), caps_(std::move(caps)), clock_(clock), runners_(std::move(runners)) {
  options_.kernelbench_slots = std::max(1, options_.kernelbench_slots);
  options_.slots = std::max(1, options_.slots);
  for (const auto& r : runners_) options_.slots = std::max(options_.slots, r->slots());
  options_.compile_threads = std::max(1, options_.compile_threads);
  options_.heartbeat_ms = std::max<int64_t>(1, options_.heartbeat_ms);
  options_.poll_ms = std::max<int64_t>(1, options_.poll_ms);
}

WorkerAgent::~WorkerAgent() {
  // The runners' threads finish first: they may still hand results to this agent.
  runners_.clear();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void WorkerAgent::wake_main() {
  if (wake_fd_ < 0) return;
  uint64_t one = 1;
  ssize_t n = write(wake_fd_, &one, sizeof(one));
  (void)n;  // the counter cannot overflow in practice; a failed wake only delays by poll_ms
}

void WorkerAgent::finish(const protocol::Job& job, std::string_view kind, std::optional<ResultRecord> r) {
  if (r) {
    r->job_id = job.spec.job_id;
    r->attempt = job.attempt;
    r->worker_id = options_.worker_id;
    r->gpu = caps_.gpu_name;
    if (r->source_hash.empty()) r->source_hash = xxh64_hex(job.spec.source);
    r->completed_wall_ms = clock_.wall_ms();
    if (r->status != ResultStatus::kPass)
      spdlog::info("worker {}: {} job {} attempt {}: {} at {}: {}", options_.worker_id, kind, r->job_id, r->attempt,
                   result_status_name(r->status), r->stage, r->reason);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    results_.push_back(Finished{Key{job.spec.job_id, job.attempt}, std::move(r)});
  }
  wake_main();
}

void WorkerAgent::send(Session& s, const protocol::Message& m) {
  try {
    std::string frame = protocol::encode(m);
    auto sent = s.socket.send(zmq::buffer(frame), zmq::send_flags::dontwait);
    // While the link is down its own warning says so every few seconds; a message per heartbeat
    // would bury it.
    if (!sent)
      spdlog::log(s.link.up() ? spdlog::level::warn : spdlog::level::debug, "worker {}: {} not sent (send queue full)",
                  options_.worker_id, protocol::type_name(m));
  } catch (const std::exception& e) {
    spdlog::error("worker {}: sending {} failed: {}", options_.worker_id, protocol::type_name(m), e.what());
  }
}

void WorkerAgent::send_ready(Session& s) {
  send(s, protocol::Ready{options_.worker_id, caps_, options_.slots, s.instance});
  s.last_ready_ms = clock_.now_ms();
}

void WorkerAgent::send_heartbeat(Session& s) {
  protocol::Heartbeat hb;
  hb.worker_id = options_.worker_id;
  hb.instance = s.instance;
  for (const auto& [id, attempt] : s.held) hb.in_flight.push_back({id, attempt});
  // The next one is due an interval from now, read before this one leaves: read after, a clock
  // moved by the peer on receiving it (a test's) would put the next one an interval too late.
  s.next_heartbeat_ms = clock_.now_ms() + options_.heartbeat_ms;
  send(s, hb);
}

void WorkerAgent::dispatch(Session& s) {
  auto busy_runners = [&] {
    int n = 0;
    for (size_t k = 0; k < runners_.size(); ++k) n += s.busy[k] > 0;
    return n;
  };
  auto exclusive_running = [&] {
    for (size_t k = 0; k < runners_.size(); ++k)
      if (s.busy[k] > 0 && runners_[k]->exclusive()) return true;
    return false;
  };
  for (auto it = s.queue.begin(); it != s.queue.end();) {
    const size_t i = it->runner;
    JobRunner& runner = *runners_[i];
    if (exclusive_running()) break;  // nothing starts beside it
    // An exclusive job waits for the device to empty, and what is queued after it waits for it.
    if (runner.exclusive() && busy_runners() > 0) break;
    if (s.busy[i] >= runner.slots()) {
      ++it;  // this kind waits; a later job of another kind may start
      continue;
    }
    protocol::Job job = std::move(it->job);
    it = s.queue.erase(it);
    ++s.busy[i];
    s.started.emplace(Key{job.spec.job_id, job.attempt}, i);
    const auto timeout = std::chrono::milliseconds(std::max<int64_t>(1, job.spec.timeout_ms));
    runner.start(job, timeout,
                 [this, job, kind = runner.kind()](std::optional<ResultRecord> r) { finish(job, kind, std::move(r)); });
  }
}

void WorkerAgent::drain_results(Session& s) {
  std::deque<Finished> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done.swap(results_);
  }
  if (done.empty()) return;
  const int64_t now = clock_.now_ms();
  for (auto& f : done) {
    s.held.erase(f.key);
    if (auto it = s.started.find(f.key); it != s.started.end()) {
      --s.busy[it->second];
      s.started.erase(it);
    }
    if (!f.result) continue;  // dropped while stopping: its lease expires at the coordinator
    const ResultRecord& r = *f.result;
    if (options_.stats) options_.stats->finish(r.status);
    if (Status st = s.outbox.add(r, now); !st.ok())
      spdlog::error("worker {}: result of job {} kept in memory only: {}", options_.worker_id, r.job_id, st.message());
    send(s, protocol::ResultMsg{options_.worker_id, r, s.instance});
  }
  if (options_.stats) options_.stats->jobs_held = static_cast<int64_t>(s.held.size());
  if (!s.stopping) dispatch(s);
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
    if (options_.stats) options_.stats->jobs_held = static_cast<int64_t>(s.held.size());
    auto runner = std::find_if(runners_.begin(), runners_.end(), [&](const auto& r) { return r->accepts(job->spec); });
    if (runner == runners_.end()) {
      ResultRecord r;
      r.status = ResultStatus::kCrash;
      r.stage = "worker";
      r.reason = "this worker has no runner for this kind of job; upgrade the worker";
      finish(*job, "unknown", std::move(r));
      return;
    }
    s.queue.push_back(Session::Queued{*job, static_cast<size_t>(runner - runners_.begin())});
    dispatch(s);
  } else if (const auto* ack = std::get_if<protocol::Ack>(&m)) {
    if (!s.outbox.ack(ack->job_id, ack->attempt))
      spdlog::debug("worker {}: ACK for job {} attempt {} not in the outbox", options_.worker_id, ack->job_id,
                    ack->attempt);
  } else if (const auto* c = std::get_if<protocol::CancelJob>(&m)) {
    cancel(s, *c);
  } else if (const auto* err = std::get_if<protocol::Error>(&m)) {
    if (err->code == protocol::ErrorCode::kUnknownWorker) {
      // Every message sent before the coordinator saw the new READY draws this error; one
      // re-registration per heartbeat interval is enough.
      if (now - s.last_ready_ms < options_.heartbeat_ms) return;
      spdlog::warn("worker {}: coordinator does not know us ({}); registering again and resending {} result(s)",
                   options_.worker_id, err->message, s.outbox.size());
      send_ready(s);
      send_heartbeat(s);
      for (const auto& r : s.outbox.all()) send(s, protocol::ResultMsg{options_.worker_id, r, s.instance});
      s.outbox.restart_backoff(now);
    } else if (err->code == protocol::ErrorCode::kWorkerIdInUse && err->instance == s.instance) {
      // Another worker holds this id: serving beside it would take its leases and results. A
      // refusal naming another instance was meant for the other (the coordinator's ROUTER hands
      // the id to the newest connection) and is ignored.
      if (s.refused.ok()) {
        spdlog::error("worker {}: the coordinator refused this worker: {}", options_.worker_id, err->message);
        s.refused = Status::invalid("the coordinator refused worker id " + options_.worker_id + ": " + err->message);
      }
    } else {
      spdlog::warn("worker {}: coordinator replied {}: {}", options_.worker_id, protocol::error_code_name(err->code),
                   err->message);
    }
  } else {
    spdlog::warn("worker {}: unexpected {} from the coordinator ignored", options_.worker_id, protocol::type_name(m));
  }
}

void WorkerAgent::cancel(Session& s, const protocol::CancelJob& c) {
  const Key key{c.job_id, c.attempt};
  auto queued = std::find_if(s.queue.begin(), s.queue.end(), [&](const Session::Queued& q) {
    return q.job.spec.job_id == c.job_id && q.job.attempt == c.attempt;
  });
  if (queued != s.queue.end()) {
    const protocol::Job job = std::move(queued->job);
    const std::string_view kind = runners_[queued->runner]->kind();
    s.queue.erase(queued);
    finish(job, kind, cancelled_before_measurement("worker"));
    spdlog::info("worker {}: job {} attempt {} cancelled before it started", options_.worker_id, c.job_id, c.attempt);
    return;
  }
  auto started = s.started.find(key);
  if (started == s.started.end()) {
    spdlog::debug("worker {}: CANCEL_JOB for job {} attempt {}, which is not running here", options_.worker_id,
                  c.job_id, c.attempt);
    return;
  }
  JobRunner& runner = *runners_[started->second];
  switch (runner.cancel(c.job_id, c.attempt)) {
    case CancelEffect::kDropped:
      spdlog::info("worker {}: job {} attempt {} cancelled before it started", options_.worker_id, c.job_id, c.attempt);
      break;
    case CancelEffect::kStopping:
      spdlog::info("worker {}: {} job {} attempt {} cancelled: it is stopped and reports CANCELLED", options_.worker_id,
                   runner.kind(), c.job_id, c.attempt);
      break;
    case CancelEffect::kFinishing:
      spdlog::info("worker {}: job {} attempt {} cancelled; the measurement in progress finishes and reports",
                   options_.worker_id, c.job_id, c.attempt);
      break;
    case CancelEffect::kNotHeld:  // it finished; its result is on its way
      break;
  }
}

Status WorkerAgent::run(std::atomic<bool>& stop) {
  if (ran_) return Status::invalid("WorkerAgent::run called twice");
  ran_ = true;
  if (options_.worker_id.empty()) return Status::invalid("worker_id is empty; give every worker a unique id");
  if (!options_.state_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options_.state_dir, ec);
    if (ec)
      return Status::unavailable("cannot create state directory " + options_.state_dir + ": " + ec.message());
  }
  // One live process per outbox: two under one id would take each other's leases and results.
  WorkerIdClaim outbox_claim;  // held while this run serves
  if (!options_.state_dir.empty()) {
    auto claim = WorkerIdClaim::claim(options_.state_dir, options_.worker_id);
    if (!claim.ok()) return claim.status();
    outbox_claim = std::move(*claim);
  }
  auto instance = worker_instance(options_.state_dir, options_.worker_id);
  if (!instance.ok()) return instance.status();
  Session s(options_, runners_.size(), clock_.now_ms());
  s.instance = *instance;
  if (Status st = s.outbox.open(clock_.now_ms()); !st.ok()) return st;
  try {
    s.socket.set(zmq::sockopt::routing_id, options_.worker_id);
    s.socket.set(zmq::sockopt::linger, static_cast<int>(options_.linger_ms));
    s.socket.set(zmq::sockopt::reconnect_ivl_max, 2000);
    s.socket.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(protocol::kMaxFrameBytes));
    // ZMTP heartbeats: a link that drops packets silently (a partition) is noticed, dropped and
    // made again, instead of waiting out TCP's retransmission backoff.
    const int link_ms = static_cast<int>(std::max<int64_t>(300, options_.link_timeout_ms));
    s.socket.set(zmq::sockopt::heartbeat_ivl, link_ms / 3);
    s.socket.set(zmq::sockopt::heartbeat_timeout, link_ms);
    s.socket.set(zmq::sockopt::connect_timeout, link_ms);
    const std::string monitor_ep = "inproc://ak-worker-link-" + std::to_string(reinterpret_cast<uintptr_t>(&s));
    if (zmq_socket_monitor(s.socket.handle(), monitor_ep.c_str(),
                           ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CONNECT_RETRIED |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0)
      throw zmq::error_t();
    s.monitor.connect(monitor_ep);
    if (!options_.curve_server_key.empty()) {
      s.socket.set(zmq::sockopt::curve_serverkey, options_.curve_server_key);
      s.socket.set(zmq::sockopt::curve_publickey, options_.curve_public_key);
      s.socket.set(zmq::sockopt::curve_secretkey, options_.curve_secret_key);
    }
    s.socket.connect(options_.coordinator_endpoint);
  } catch (const zmq::error_t& e) {
    return Status::invalid("cannot connect to coordinator '" + options_.coordinator_endpoint + "': " + e.what() +
                           "; expected an endpoint like tcp://host:5555");
  }
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return Status::internal("eventfd failed");

  spdlog::info("worker {}: {} ({}), {} slot(s), {} compile thread(s), coordinator {}", options_.worker_id,
               caps_.gpu_name, backend_name(options_.backend), options_.slots, options_.compile_threads,
               options_.coordinator_endpoint);
  s.next_heartbeat_ms = clock_.now_ms() + options_.heartbeat_ms;  // before READY leaves (send_heartbeat)
  send_ready(s);

  for (;;) {
    if (!s.stopping && (stop.load() || !s.refused.ok())) {
      // Stop taking work; keep heartbeating and delivering until the work in progress is done.
      // Jobs not yet begun are dropped without a result (their leases expire).
      s.stopping = true;
      for (const auto& q : s.queue) s.held.erase(Key{q.job.spec.job_id, q.job.attempt});
      s.queue.clear();
      if (options_.stats) options_.stats->jobs_held = static_cast<int64_t>(s.held.size());
      for (auto& r : runners_) r->shutdown();
    }
    drain_results(s);
    if (s.stopping && s.started.empty()) break;
    const int64_t now = clock_.now_ms();
    for (const auto& r : s.outbox.due(now)) send(s, protocol::ResultMsg{options_.worker_id, r, s.instance});
    if (now >= s.next_heartbeat_ms) send_heartbeat(s);
    if (auto warning = s.link.due_warning(now)) spdlog::warn("worker {}: {}", options_.worker_id, *warning);

    int64_t wait_ms = std::min(options_.poll_ms, s.next_heartbeat_ms - now);
    if (auto due = s.outbox.next_due_ms()) wait_ms = std::min(wait_ms, *due - now);
    wait_ms = std::max<int64_t>(0, wait_ms);
    zmq::pollitem_t items[] = {{s.socket.handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, wake_fd_, ZMQ_POLLIN, 0},
                               {s.monitor.handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 3, std::chrono::milliseconds(wait_ms));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) spdlog::error("worker {}: poll failed: {}", options_.worker_id, e.what());
      continue;
    }
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t count;
      ssize_t n = read(wake_fd_, &count, sizeof(count));
      (void)n;
    }
    if (items[2].revents & ZMQ_POLLIN) read_link_events(s);
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

  // A refused worker never held the id: a DISCONNECT under it would be refused too.
  if (s.refused.ok()) send(s, protocol::Disconnect{options_.worker_id, "worker stopping", s.instance});
  zmq_socket_monitor(s.socket.handle(), nullptr, 0);
  if (!s.refused.ok()) return s.refused;
  spdlog::info("worker {}: stopped; {} result(s) not yet acknowledged", options_.worker_id, s.outbox.size());
  return Status::ok_status();
}

void WorkerAgent::keep_id_claim(WorkerIdClaim claim) {
  options_.worker_id = claim.id();
  id_claim_ = std::move(claim);
}

void WorkerAgent::read_link_events(Session& s) {
  for (;;) {
    // Two frames per event: 16-bit event and 32-bit value, then the endpoint.
    zmq::message_t event, address;
    if (!s.monitor.recv(event, zmq::recv_flags::dontwait)) return;
    if (event.more()) (void)s.monitor.recv(address, zmq::recv_flags::dontwait);
    if (event.size() < 6) continue;
    uint16_t id;
    uint32_t value;
    std::memcpy(&id, event.data(), sizeof(id));
    std::memcpy(&value, static_cast<const char*>(event.data()) + sizeof(id), sizeof(value));
    const int64_t now = clock_.now_ms();
    switch (id) {
      case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        s.link.connected(now);
        spdlog::info("worker {}: connected to coordinator {}", options_.worker_id, options_.coordinator_endpoint);
        if (auto back = s.link.take_recovery()) spdlog::warn("worker {}: {}", options_.worker_id, *back);
        break;
      case ZMQ_EVENT_DISCONNECTED:
        if (s.link.up())
          spdlog::warn("worker {}: lost the connection to coordinator {}; reconnecting", options_.worker_id,
                       options_.coordinator_endpoint);
        s.link.failed(now, "the connection ended or no heartbeat was answered");
        break;
      case ZMQ_EVENT_CONNECT_RETRIED:
        s.link.failed(now, "no TCP connection");
        break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        s.link.failed(now,
                      "the coordinator refused this worker's CURVE key (ZAP status " + std::to_string(value) +
                          "): add its public key to the coordinator's --allow-workers file",
                      /*handshake=*/true);
        break;
      default:  // a handshake that failed for another reason
        s.link.failed(now,
                      "the handshake failed (error " + std::to_string(value) +
                          "): do both sides use CURVE keys, and is --coordinator-key the coordinator's?",
                      /*handshake=*/true);
        break;
    }
  }
}

AgentParallelism agent_parallelism(Backend backend, unsigned hardware_threads, size_t agents_on_host, int slots,
                                   int compile_threads) {
  AgentParallelism p;
  if (compile_threads > 0) {
    p.compile_threads = compile_threads;
  } else if (backend == Backend::kCpu) {
    p.compile_threads = 1;
  } else {
    const unsigned share = hardware_threads / 2 / static_cast<unsigned>(std::max<size_t>(1, agents_on_host));
    p.compile_threads = static_cast<int>(std::clamp(share, 1u, 8u));
    if (slots > 0) p.compile_threads = std::clamp(slots - 1, 1, p.compile_threads);
  }
  p.slots = slots > 0 ? slots : p.compile_threads + 1;
  return p;
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
  WorkerIdClaim claim;
  if (options.worker_id.empty()) {
    const std::string lock_dir = options.id_lock_dir.empty() ? std::string(kDefaultIdLockDir) : options.id_lock_dir;
    auto c = WorkerIdClaim::claim_first_free(lock_dir, default_worker_id(caps, options.backend, options.device_index),
                                             options.state_dir);
    if (!c.ok()) return c.status();
    claim = std::move(*c);
    options.worker_id = claim.id();
  }
  if (options.sandbox_path.empty()) return Status::invalid("no sandbox executable given (sandbox_path)");

  CompilerOptions copt;
  copt.cache_dir = options.cache_dir;
  copt.python = options.python;
  copt.confinement = options.confinement;
  auto compiler = make_compiler(copt);
  if (!compiler) return Status::internal("make_compiler returned no compiler");

  SandboxOptions sopt;
  sopt.executable = options.sandbox_path;
  sopt.backend = options.backend;
  sopt.device_index = options.device_index;
  sopt.stderr_path = options.sandbox_log;
  sopt.extra_env = options.sandbox_env;
  sopt.start_timeout = std::chrono::milliseconds(options.sandbox_start_timeout_ms);
  sopt.confinement = options.confinement;
  sopt.stats = options.stats;
  auto supervisor = std::make_unique<SandboxSupervisor>(sopt);
  if (Status st = supervisor->start(); !st.ok()) return st;
  // The sandbox's calibration (and datasheet match) is what the worker announces as its ceilings.
  caps.ceilings = supervisor->hello().ceilings;
  if (caps.ceilings.copy_bandwidth_gbps <= 0) caps.ceilings.copy_bandwidth_gbps = supervisor->hello().copy_bandwidth_gbps;
  if (!supervisor->hello().torch_version.empty()) caps.versions["torch"] = supervisor->hello().torch_version;

  auto agent = std::make_unique<WorkerAgent>(std::move(options), std::move(caps), clock, std::move(compiler),
                                             std::move(supervisor));
  if (claim.held()) agent->keep_id_claim(std::move(claim));
  return agent;
}

}  // namespace ak
