#include "coordinator/coordinator.h"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

namespace ak {

namespace pr = protocol;

namespace {
// The User-Id the ZAP handler gave the sender of `m` (its CURVE key), "" when none.
std::string user_id(zmq::message_t& m) {
  const char* v = zmq_msg_gets(m.handle(), "User-Id");
  return v ? std::string(v) : std::string();
}
// ZeroMQ drops the connection of a peer whose frame is larger (ZMQ_MAXMSGSIZE); frames between
// kMaxFrameBytes and this get an OVERSIZED reply. Together with the receive high-water marks it
// bounds what one connection can make the coordinator hold: rcvhwm x this.
constexpr int64_t kHardFrameCapBytes = int64_t(pr::kMaxFrameBytes) + (int64_t{1} << 20);

FarmCoreOptions core_options(const CoordinatorOptions& o) {
  FarmCoreOptions c;
  c.scheduler = o.scheduler;
  c.max_jobs_per_submit = o.max_jobs_per_submit;
  c.max_jobs_per_campaign = o.max_jobs_per_campaign;
  return c;
}
}  // namespace

Coordinator::Coordinator(CoordinatorOptions options, Store& store, const Clock& clock, CoordinatorMetrics& metrics)
    : options_(std::move(options)),
      clock_(clock),
      metrics_(metrics),
      core_(core_options(options_), store, clock),
      ctx_(1),
      refusal_log_(options_.refusal_log_interval_ms),
      workers_(ctx_, zmq::socket_type::router),
      clients_(ctx_, zmq::socket_type::router),
      client_limiter_(options_.client_rate) {}

Coordinator::~Coordinator() = default;

Status Coordinator::start() {
  const bool curve = options_.curve.has_value();
  if (!curve && !options_.insecure) {
    for (const auto& ep : {options_.worker_endpoint, options_.client_endpoint})
      if (!is_loopback_endpoint(ep))
        return Status::invalid(
            "refusing to bind " + ep +
            " without CURVE keys: any peer that reaches it could submit code, forge results and "
            "cancel campaigns; give --curve-secret, --allow-workers and --allow-clients (autokernel "
            "keys generate NAME), bind a loopback address (tcp://127.0.0.1:PORT), or pass --insecure "
            "on a network where every host is trusted");
  }
  if (curve && !curve_available())
    return Status::unavailable(
        "this libzmq has no CURVE support (built without libsodium); install libzmq5 from the "
        "distribution or run without keys on loopback");
  // Refused frames come and go in megabytes. glibc raises its mmap threshold after such a buffer
  // is freed, after which they come from the heap and fragment it; RSS then grows without bound
  // under garbage (issue 19's fuzz run). A fixed threshold keeps every buffer over 128 KiB in its
  // own mapping, returned to the kernel when freed; run() trims the heap's free pages now and then.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  FarmEffects effects;
  if (Status s = core_.start(&effects); !s.ok()) return s;
  try {
    if (curve) {
      // The handler must listen before the first handshake, and the sockets must be servers
      // before they bind.
      zap_ = std::make_unique<ZapHandler>(ctx_, options_.allow_workers, options_.allow_clients);
      workers_.set(zmq::sockopt::zap_domain, kWorkersZapDomain);
      clients_.set(zmq::sockopt::zap_domain, kClientsZapDomain);
      for (zmq::socket_t* sock : {&workers_, &clients_}) {
        sock->set(zmq::sockopt::curve_server, 1);
        sock->set(zmq::sockopt::curve_secretkey, options_.curve->secret_z85);
      }
    }
    workers_.set(zmq::sockopt::router_mandatory, 1);
    // A worker that restarts under its id takes the id over at once, instead of being turned away
    // while its predecessor's connection lingers (half-open after a host crash, or not yet torn
    // down). With CURVE, messages under a registered id from another key are still refused.
    workers_.set(zmq::sockopt::router_handover, 1);
    workers_.set(zmq::sockopt::linger, 0);
    // Hard cap above the protocol limit: frames between the two get an OVERSIZED reply, frames
    // above it make ZeroMQ drop the peer's connection. With the receive high-water marks this
    // bounds what one connection can queue (common/PROTOCOL.md, "Limits").
    workers_.set(zmq::sockopt::maxmsgsize, kHardFrameCapBytes);
    workers_.set(zmq::sockopt::rcvhwm, options_.worker_rcvhwm);
    workers_.set(zmq::sockopt::sndhwm, options_.sndhwm);
    clients_.set(zmq::sockopt::linger, 0);
    clients_.set(zmq::sockopt::maxmsgsize, kHardFrameCapBytes);
    clients_.set(zmq::sockopt::rcvhwm, options_.client_rcvhwm);
    clients_.set(zmq::sockopt::sndhwm, options_.sndhwm);
    workers_.bind(options_.worker_endpoint);
    clients_.bind(options_.client_endpoint);
    worker_endpoint_ = workers_.get(zmq::sockopt::last_endpoint);
    client_endpoint_ = clients_.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return Status::unavailable("cannot bind " + options_.worker_endpoint + " / " + options_.client_endpoint + ": " +
                               e.what() + "; is another coordinator running there?");
  }
  if (curve) {
    spdlog::info("CURVE on: {} worker key(s), {} client key(s) allowed; coordinator public key {}",
                 options_.allow_workers.keys.size(), options_.allow_clients.keys.size(), options_.curve->public_z85);
  } else if (options_.insecure) {
    spdlog::warn("no CURVE keys and --insecure: every peer that reaches {} or {} may submit, report and cancel",
                 worker_endpoint_, client_endpoint_);
  } else {
    spdlog::info("no CURVE keys: serving loopback only ({}, {}); autokernel keys generate to serve a network",
                 worker_endpoint_, client_endpoint_);
  }
  carry_out(effects);
  refresh_gauges();
  return {};
}

void Coordinator::answer_zap() {
  if (!zap_) return;
  while (auto v = zap_->answer_one()) {
    if (v->allowed) continue;
    metrics_.refused("unknown_key");
    refusal_log_.refused(v->address.empty() ? "(unknown address)" : v->address, "unknown_key",
                         "handshake on the " + v->domain + " socket refused: " + v->reason, clock_.now_ms());
  }
}

ClientPeer Coordinator::client_peer(const std::string& key) const {
  if (!options_.curve) return {};
  auto it = options_.allow_clients.keys.find(key);
  // A key is admitted only when listed, so a miss means the list and the handshake disagree:
  // grant the least.
  return {key.empty() ? std::string("(no key)") : key,
          it == options_.allow_clients.keys.end() ? ClientRole::kSubmit : it->second};
}

Status Coordinator::run(const std::atomic<bool>& stop) {
  int64_t next_tick = clock_.now_ms();
  int64_t next_trim = next_tick;
  std::vector<zmq::pollitem_t> items = {{workers_.handle(), 0, ZMQ_POLLIN, 0}, {clients_.handle(), 0, ZMQ_POLLIN, 0}};
  if (zap_) items.push_back({zap_->socket().handle(), 0, ZMQ_POLLIN, 0});
  while (!stop.load()) {
    const int64_t wait = std::max<int64_t>(0, next_tick - clock_.now_ms());
    try {
      zmq::poll(items, std::chrono::milliseconds(wait));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return Status::internal(std::string("poll: ") + e.what());
    }
    answer_zap();
    // Drain a bounded batch from each socket so neither starves the other or the ticks.
    for (int i = 0; i < 256; ++i) {
      std::vector<zmq::message_t> frames;
      try {
        auto r = zmq::recv_multipart(workers_, std::back_inserter(frames), zmq::recv_flags::dontwait);
        if (!r) break;
      } catch (const zmq::error_t& e) {
        break;
      }
      if (frames.empty()) continue;
      std::string identity = frames.front().to_string();
      try {
        on_worker_message(identity, frames);
      } catch (const std::exception& e) {
        spdlog::error("handler for worker {} failed: {}", identity, e.what());
        protocol_error(identity, pr::ErrorCode::kInternal,
                       std::string("coordinator failed on this frame: ") + e.what());
      }
    }
    for (int i = 0; i < 64; ++i) {
      std::vector<zmq::message_t> frames;
      try {
        auto r = zmq::recv_multipart(clients_, std::back_inserter(frames), zmq::recv_flags::dontwait);
        if (!r) break;
      } catch (const zmq::error_t&) {
        break;
      }
      try {
        on_client_message(frames);
      } catch (const std::exception& e) {
        spdlog::error("client handler failed: {}", e.what());
      }
    }
    FarmEffects effects;
    core_.answer_waiters(&effects);
    if (clock_.now_ms() >= next_tick) {
      core_.on_tick(&effects);
      next_tick = clock_.now_ms() + options_.tick_ms;
      if (clock_.now_ms() >= next_trim) {
        malloc_trim(0);
        next_trim = clock_.now_ms() + 1'000;
      }
    }
    carry_out(effects);
    refresh_gauges();
  }
  return {};
}

void Coordinator::log_refusal(const std::string& peer, const std::string& what) {
  auto suppressed = frame_refusal_log_.admit(peer, clock_.now_ms());
  if (!suppressed) return;
  if (*suppressed == 0)
    spdlog::warn("{} (peer '{}')", what, peer.substr(0, 64));
  else
    spdlog::warn("{} (peer '{}'; {} more refusals of this peer since its last line)", what, peer.substr(0, 64),
                 *suppressed);
}

void Coordinator::protocol_error(const std::string& identity, pr::ErrorCode code, const std::string& message) {
  metrics_.protocol_error(code);
  log_refusal("worker " + identity, std::string("protocol error: ") + pr::error_code_name(code) + " " + message);
  send_worker(identity, pr::Error{code, message});
}

void Coordinator::on_worker_message(const std::string& identity, std::vector<zmq::message_t>& frames) {
  if (frames.size() != 2) {
    protocol_error(identity, pr::ErrorCode::kMalformed,
                   "expected exactly one body frame, got " + std::to_string(frames.size() - 1));
    return;
  }
  auto d = pr::decode(frames[1].to_string_view());
  if (!d.ok()) {
    protocol_error(identity, d.error.code, d.error.message);
    return;
  }
  FarmEffects effects;
  core_.on_worker(identity, *d.message, &effects, options_.curve ? user_id(frames[1]) : std::string());
  carry_out(effects);
}

void Coordinator::on_client_message(std::vector<zmq::message_t>& frames) {
  // REQ envelope: [identity][empty][body]
  if (frames.size() < 3) return;
  const std::string identity = frames.front().to_string();
  // Budgets are per address, not per connection: a peer gains nothing by reconnecting.
  const char* address = zmq_msg_gets(frames.back().handle(), "Peer-Address");
  const std::string peer = address ? std::string(address) : identity;
  const auto refuse = [&](const pr::Error& e) {
    metrics_.protocol_error(e.code);
    log_refusal("client " + peer,
                std::string("client request refused: ") + pr::error_code_name(e.code) + " " + e.message.substr(0, 200));
    reply_client(identity, pr::encode(e));
  };
  if (!client_limiter_.allow(peer, clock_.now_ms())) {
    char limit[96];
    std::snprintf(limit, sizeof limit, "%g requests per second (bursts of %g)", options_.client_rate.rate_per_s,
                  options_.client_rate.burst);
    refuse({pr::ErrorCode::kBadRequest, "too many requests from " + peer + ": this coordinator serves at most " +
                                            limit + " per peer; retry later"});
    return;
  }
  auto d = pr::decode(frames.back().to_string_view());
  if (!d.ok()) {
    refuse(d.error);
    return;
  }
  FarmEffects effects;
  core_.on_client(identity, *d.message, &effects, client_peer(options_.curve ? user_id(frames.back()) : std::string()));
  carry_out(effects);
}

void Coordinator::carry_out(FarmEffects& fx) {
  // Refusals are counted and logged before the answers go out: a peer that has its refusal has
  // it in the metrics and the log too.
  for (const auto& r : fx.refusals) {
    metrics_.refused(r.reason);
    refusal_log_.refused(r.peer, r.reason, r.detail, clock_.now_ms());
  }
  for (const auto& w : fx.to_workers) send_worker(w.worker_id, w.message);
  for (const auto& c : fx.to_clients) reply_client(c.identity, pr::encode(c.message));
  for (int64_t i = 0; i < fx.dispatched; ++i) metrics_.dispatched();
  for (int64_t i = 0; i < fx.requeued; ++i) metrics_.requeued();
  for (int64_t i = 0; i < fx.store_errors; ++i) metrics_.store_error();
  for (int64_t i = 0; i < fx.duplicate_results; ++i) metrics_.duplicate_result();
  for (const auto& c : fx.completed) metrics_.completed(c.status, c.duration_s);
  for (auto code : fx.errors) metrics_.protocol_error(code);
}

void Coordinator::send_worker(const std::string& worker_id, const pr::Message& m) {
  try {
    const std::string body = pr::encode(m);
    std::array<zmq::const_buffer, 2> parts = {zmq::buffer(worker_id), zmq::buffer(body)};
    zmq::send_multipart(workers_, parts, zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    // EHOSTUNREACH: the peer is gone. Leases and the outbox make that harmless.
    spdlog::debug("send to {} failed: {}", worker_id, e.what());
  }
}

void Coordinator::reply_client(const std::string& identity, const std::string& frame) {
  std::array<zmq::const_buffer, 3> parts = {zmq::buffer(identity), zmq::const_buffer(nullptr, 0), zmq::buffer(frame)};
  try {
    zmq::send_multipart(clients_, parts, zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    spdlog::warn("reply to client failed: {}", e.what());
  }
}

void Coordinator::refresh_gauges() {
  const Scheduler& s = core_.scheduler();
  auto c = s.counts();
  metrics_.set_jobs(c.queued, c.leased, c.done, c.lost);
  metrics_.set_workers(static_cast<int64_t>(s.workers().size()));
  metrics_.heartbeats_missed(s.heartbeats_missed());
  const int64_t now = clock_.now_ms();
  if (now < next_snapshot_ms_) return;
  next_snapshot_ms_ = now + 1'000;
  const protocol::StatusReply st = core_.status();
  metrics_.set_campaigns(st.campaigns);
  int64_t unrunnable = 0;
  for (const auto& [need, n] : st.unrunnable) unrunnable += n;
  metrics_.set_unrunnable(unrunnable);
}

}  // namespace ak
