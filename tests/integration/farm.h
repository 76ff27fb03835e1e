// Farm: a real farm on loopback for integration tests — a real redis-server (AOF on), a real
// coordinator process and real worker processes (the autokernel binary), all on ephemeral
// endpoints. Readiness is the coordinator's READY line and the workers' registrations as seen
// through STATUS; nothing sleeps for a fixed time.
#pragma once

#include <signal.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/process.h"
#include "coordinator/auth.h"
#include "coordinator/client.h"
#include "coordinator/store/redis_server.h"
#include "coordinator/store/redis_store.h"

namespace ak::testing {

inline std::string bin(const std::string& name) { return std::string(AK_BIN_DIR) + "/" + name; }

class Farm {
 public:
  struct Options {
    int64_t lease_ms = 2000;
    int64_t worker_timeout_ms = 3000;
    int max_attempts = 3;
    // CURVE (PROTOCOL.md, "Authentication"): key pairs under dir()/keys for the coordinator, the
    // workers ("worker", "worker2"), clients "alice" and "mallory" (role submit) and "admin";
    // workers started with keys, client() as admin. The rogue keys ("rogue") are in no list.
    bool curve = false;
    // Appended to every worker's command line (e.g. --unconfined for a test whose candidate talks
    // to it through files in the farm's folder, which confinement hides from candidates).
    std::vector<std::string> worker_args;
  };

  explicit Farm(Options o) : options_(o) {
    char tmpl[] = "/tmp/ak-farm-XXXXXX";
    dir_ = mkdtemp(tmpl);
    RedisServerOptions ro;
    ro.data_dir = dir_ + "/redis";
    auto r = RedisServer::start(ro);
    if (!r.ok()) throw std::runtime_error("redis: " + r.status().message());
    redis_ = std::move(*r);
    if (options_.curve) make_keys();
  }
  Farm() : Farm(Options{}) {}

  // The key pair written as dir()/keys/<name>.key and .pub.
  CurveKeyPair keys(const std::string& name) const {
    auto k = read_secret_key_file(dir_ + "/keys/" + name + ".key");
    if (!k.ok()) throw std::runtime_error(k.status().message());
    return *k;
  }
  // Client keys of `name` for this farm's coordinator.
  CurveClientKeys client_keys(const std::string& name) const {
    const CurveKeyPair k = keys(name);
    return {keys("coordinator").public_z85, k.public_z85, k.secret_z85};
  }
  std::string key_file(const std::string& name) const { return dir_ + "/keys/" + name + ".key"; }
  std::string pub_file(const std::string& name) const { return dir_ + "/keys/" + name + ".pub"; }
  std::string redis_url() const { return redis_->url(); }

  ~Farm() {
    for (auto& [id, w] : workers_) w.signal(SIGKILL);
    workers_.clear();
    coordinator_.reset();
    redis_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Starts (or restarts) the coordinator. On restart it binds the same worker and client ports,
  // as an operator restarting a crashed coordinator would.
  void start_coordinator() {
    std::string wb = workers_ep_.empty() ? "tcp://127.0.0.1:*" : workers_ep_;
    std::string cb = clients_ep_.empty() ? "tcp://127.0.0.1:*" : clients_ep_;
    ChildProcess::Options o;
    o.capture_stdout = true;
    // Its log (stderr), across restarts.
    o.output_path = dir_ + "/coordinator.log";
    o.append_output = true;
    std::vector<std::string> argv = {bin("autokernel"),
                                     "--log-level",
                                     "warn",
                                     "coordinator",
                                     "--redis",
                                     redis_->url(),
                                     "--workers-bind",
                                     wb,
                                     "--clients-bind",
                                     cb,
                                     "--metrics",
                                     "127.0.0.1:0",
                                     "--lease-ms",
                                     std::to_string(options_.lease_ms),
                                     "--worker-timeout-ms",
                                     std::to_string(options_.worker_timeout_ms),
                                     "--max-attempts",
                                     std::to_string(options_.max_attempts)};
    if (options_.curve)
      argv.insert(argv.end(), {"--curve-secret", key_file("coordinator"), "--allow-workers",
                               dir_ + "/keys/workers.allow", "--allow-clients", dir_ + "/keys/clients.allow"});
    auto c = ChildProcess::spawn(argv, o);
    if (!c.ok()) throw std::runtime_error(c.status().message());
    auto line = c->wait_for_line("READY ", std::chrono::seconds(30));
    if (!line.ok()) throw std::runtime_error("coordinator: " + line.status().message());
    auto ready = protocol::parse_reply<protocol::CoordinatorReadyLine>(nlohmann::json::parse(*line));
    if (!ready.ok()) throw std::runtime_error("coordinator: " + ready.status().message());
    workers_ep_ = ready->workers;
    clients_ep_ = ready->clients;
    metrics_port_ = ready->metrics_port;
    coordinator_ = std::make_unique<ChildProcess>(std::move(*c));
    client_ = std::make_unique<CoordinatorClient>(clients_ep_, std::chrono::seconds(10),
                                                  options_.curve ? client_keys("admin") : CurveClientKeys{});
  }

  // The coordinator's log lines (its stdout after the READY line) that have arrived so far.
  // What the coordinator printed (stdout, drained) and every line of its log so far (stderr).
  std::vector<std::string> coordinator_output() {
    std::vector<std::string> lines;
    for (;;) {
      // read_line looks at the pipe only while its time (in whole ms) is not up.
      auto line = coordinator_->read_line(std::chrono::milliseconds(20));
      if (!line.ok() || !line->has_value()) break;
      lines.push_back(**line);
    }
    std::ifstream log(dir_ + "/coordinator.log");
    for (std::string l; std::getline(log, l);) lines.push_back(l);
    return lines;
  }

  void kill_coordinator() {
    coordinator_->signal(SIGKILL);
    coordinator_->wait();
    coordinator_.reset();
  }

  void start_worker(const std::string& id, int slots = 2, const std::string& backend = "cpu") {
    std::vector<std::string> argv = {bin("autokernel"),
                                     "--log-level",
                                     "warn",
                                     "worker",
                                     "--backend",
                                     backend,
                                     "--id",
                                     id,
                                     "--coordinator",
                                     workers_ep_,
                                     "--slots",
                                     std::to_string(slots),
                                     "--heartbeat-ms",
                                     "200",
                                     "--cache-dir",
                                     dir_ + "/cache",
                                     "--state-dir",
                                     dir_ + "/state-" + id};
    if (options_.curve)
      argv.insert(argv.end(), {"--key", key_file("worker"), "--coordinator-key", pub_file("coordinator")});
    argv.insert(argv.end(), options_.worker_args.begin(), options_.worker_args.end());
    auto w = ChildProcess::spawn(argv, {});
    if (!w.ok()) throw std::runtime_error(w.status().message());
    workers_.emplace(id, std::move(*w));
  }

  void kill_worker(const std::string& id) {
    auto it = workers_.find(id);
    it->second.signal(SIGKILL);
    it->second.wait();
    workers_.erase(it);
  }

  CoordinatorClient& client() { return *client_; }

  // Waits until pred(status) holds or the deadline passes. Each STATUS after the first is a long
  // poll that the coordinator answers when its state version moves, so nothing sleeps here.
  nlohmann::json wait_status(const std::function<bool(const nlohmann::json&)>& pred,
                             std::chrono::seconds timeout, const std::string& what) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    nlohmann::json last;
    int64_t version = -1;
    while (std::chrono::steady_clock::now() < deadline) {
      auto st = version < 0 ? client_->status() : client_->status_after(version, std::chrono::seconds(2));
      if (!st.ok()) continue;  // the client already waited out its timeout (coordinator restarting)
      last = *st;              // the reply as JSON (to_json), which the predicates read
      version = last.value("version", int64_t{-1});
      if (pred(last)) return last;
    }
    ADD_FAILURE() << "timed out waiting for " << what << "; last status: " << last.dump();
    return last;
  }

  void wait_workers(size_t n) {
    wait_status([&](const nlohmann::json& s) { return s["workers"].size() >= n; }, std::chrono::seconds(60),
                std::to_string(n) + " workers");
  }

  nlohmann::json wait_campaign(const std::string& cid, std::chrono::seconds timeout) {
    return wait_status(
        [&](const nlohmann::json& s) {
          for (const auto& c : s["campaigns"])
            if (c["campaign_id"] == cid) return c.value("complete", c["finished"] == c["total"]);
          return false;
        },
        timeout, "campaign " + cid);
  }

  // Waits until campaign cid has at least n finished jobs.
  nlohmann::json wait_finished(const std::string& cid, int n, std::chrono::seconds timeout) {
    return wait_status(
        [&](const nlohmann::json& s) {
          for (const auto& c : s["campaigns"])
            if (c["campaign_id"] == cid) return c["finished"].get<int>() >= n;
          return false;
        },
        timeout, std::to_string(n) + " results of " + cid);
  }

  std::string submit(const nlohmann::json& campaign) {
    auto r = client_->submit(campaign);
    if (!r.ok()) throw std::runtime_error("submit: " + r.status().message());
    return r->campaign_id;
  }

  StoreSnapshot snapshot() {
    auto store = RedisStore::connect(redis_->url(), std::chrono::seconds(5));
    if (!store.ok()) throw std::runtime_error(store.status().message());
    auto snap = (*store)->load();
    if (!snap.ok()) throw std::runtime_error(snap.status().message());
    return *snap;
  }

  // GET /metrics over a plain socket.
  std::string scrape() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(metrics_port_));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd);
      return "";
    }
    const std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    (void)!write(fd, req.data(), req.size());
    std::string resp;
    char buf[8192];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) resp.append(buf, static_cast<size_t>(n));
    close(fd);
    auto body = resp.find("\r\n\r\n");
    return body == std::string::npos ? "" : resp.substr(body + 4);
  }

  const std::string& dir() const { return dir_; }
  const std::string& workers_endpoint() const { return workers_ep_; }
  const std::string& client_endpoint() const { return clients_ep_; }
  int metrics_port() const { return metrics_port_; }
  pid_t coordinator_pid() const { return coordinator_ ? coordinator_->pid() : -1; }

 private:
  void make_keys() {
    const std::string kd = dir_ + "/keys";
    for (const char* name : {"coordinator", "worker", "worker2", "alice", "mallory", "admin", "rogue"}) {
      auto k = generate_curve_keypair();
      if (!k.ok()) throw std::runtime_error(k.status().message());
      if (Status s = write_key_files(kd, name, *k); !s.ok()) throw std::runtime_error(s.message());
    }
    std::ofstream(kd + "/workers.allow") << read_text_file(kd + "/worker.pub") << read_text_file(kd + "/worker2.pub");
    std::ofstream(kd + "/clients.allow") << "# clients\n"
                                         << keys("alice").public_z85 << " submit # alice\n"
                                         << keys("mallory").public_z85 << "\n"
                                         << keys("admin").public_z85 << " admin\n";
  }
  static std::string read_text_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  Options options_;
  std::string dir_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<ChildProcess> coordinator_;
  std::map<std::string, ChildProcess> workers_;
  std::unique_ptr<CoordinatorClient> client_;
  std::string workers_ep_, clients_ep_;
  int metrics_port_ = 0;
};

// Sum of a Prometheus series over all label sets whose text contains `labels` ("" for all).
inline double metric_value(const std::string& text, const std::string& name, const std::string& labels = "") {
  std::istringstream in(text);
  std::string line;
  double total = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind(name, 0) != 0) continue;
    const char next = line.size() > name.size() ? line[name.size()] : ' ';
    if (next != ' ' && next != '{') continue;
    if (!labels.empty() && line.find(labels) == std::string::npos) continue;
    total += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return total;
}

// A campaign of quick CPU softmax jobs: `n_jobs` jobs (rounded up to whole repeats).
inline nlohmann::json quick_campaign(int n_jobs, const std::string& name) {
  // 24 CPU configurations x 1 shape x 1 dtype per repeat.
  const int per_repeat = 24;
  return {{"name", name},
          {"kernel_type", "softmax"},
          {"backend", "cpu"},
          {"shapes", {{8, 64}}},
          {"dtypes", {"fp32"}},
          {"configs", "all"},
          {"repeat", (n_jobs + per_repeat - 1) / per_repeat},
          {"measure", {{"warmup", 1}, {"min_samples", 3}, {"max_samples", 5}, {"max_time_ms", 5}}}};
}

// Runs `autokernel --log-level warn <args>` (a client command) to its end; its exit code.
inline int run_autokernel(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {bin("autokernel"), "--log-level", "warn"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto p = ChildProcess::spawn(argv, {});
  if (!p.ok()) return -1;
  return p->wait();
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// run_autokernel with the command's stdout and stderr written to `output_path`.
inline int run_autokernel_to(const std::vector<std::string>& args, const std::string& output_path) {
  std::vector<std::string> argv = {bin("autokernel"), "--log-level", "warn"};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess::Options o;
  o.output_path = output_path;
  auto p = ChildProcess::spawn(argv, o);
  if (!p.ok()) return -1;
  return p->wait();
}

}  // namespace ak::testing
