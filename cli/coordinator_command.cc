// autokernel coordinator: Redis (given or private), the coordinator, /metrics.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <iostream>

#include "cli/commands.h"
#include "common/clock.h"
#include "coordinator/auth.h"
#include "coordinator/coordinator.h"
#include "coordinator/metrics.h"
#include "coordinator/store/redis_server.h"
#include "coordinator/store/redis_store.h"

namespace ak::cli {

int coordinator(const CoordinatorArgs& a) {
  CoordinatorOptions o;
  // Keys first: a coordinator that cannot authenticate must not start serving.
  const bool curve = !a.curve_secret.empty();
  if (curve != !a.allow_workers.empty() || curve != !a.allow_clients.empty()) {
    std::cerr << "autokernel coordinator: CURVE needs --curve-secret, --allow-workers and --allow-clients together "
                 "(an empty allow-list file admits nobody)\n";
    return 2;
  }
  if (curve) {
    auto keys = read_secret_key_file(a.curve_secret);
    auto workers = load_allow_list(a.allow_workers, false);
    auto clients = load_allow_list(a.allow_clients, true);
    for (const Status& s : {keys.status(), workers.status(), clients.status()})
      if (!s.ok()) {
        std::cerr << "autokernel coordinator: " << s.message() << "\n";
        return 2;
      }
    o.curve = *keys;
    o.allow_workers = std::move(*workers);
    o.allow_clients = std::move(*clients);
  }
  o.insecure = a.insecure;
  o.worker_endpoint = !a.workers_bind.empty() ? a.workers_bind : curve ? "tcp://*:5555" : "tcp://127.0.0.1:5555";
  o.client_endpoint = !a.clients_bind.empty() ? a.clients_bind : curve ? "tcp://*:5556" : "tcp://127.0.0.1:5556";
  if (!a.metrics_bind.empty() && !is_loopback_address(a.metrics_bind))
    spdlog::info("/metrics on {}, beyond loopback as --metrics says", a.metrics_bind);
  std::unique_ptr<RedisServer> private_redis;
  std::string url = a.redis_url;
  if (url.empty()) {
    RedisServerOptions ro;
    ro.data_dir = a.data_dir + "/redis";
    auto srv = RedisServer::start(ro);
    if (!srv.ok()) {
      std::cerr << "autokernel coordinator: no --redis given and a private redis-server did not start: "
                << srv.status().message() << "\n";
      return 1;
    }
    private_redis = std::move(*srv);
    url = private_redis->url();
    spdlog::info("private redis-server (AOF on) at {}", url);
  }
  auto store = RedisStore::connect(url, std::chrono::seconds(5));
  if (!store.ok()) {
    std::cerr << "autokernel coordinator: " << store.status().message() << "\n";
    return 1;
  }
  SystemClock clock;
  CoordinatorMetrics metrics;
  metrics.set_build_info(AK_VERSION);
  if (Status s = metrics.serve(a.metrics_bind); !s.ok()) {
    std::cerr << "autokernel coordinator: " << s.message() << "\n";
    return 1;
  }
  o.scheduler.lease_ms = a.lease_ms;
  o.scheduler.worker_timeout_ms = a.worker_timeout_ms;
  o.scheduler.max_attempts = a.max_attempts;
  o.max_jobs_per_submit = a.max_jobs_per_submit;
  o.max_jobs_per_campaign = a.max_jobs_per_campaign;
  o.client_rate.rate_per_s = a.client_requests_per_s;
  o.client_rate.burst = 2 * a.client_requests_per_s;
  Coordinator coord(o, **store, clock, metrics);
  if (Status s = coord.start(); !s.ok()) {
    std::cerr << "autokernel coordinator: " << s.message() << "\n";
    return 1;
  }
  // Readiness handshake for whoever started us (autokernel run, tests): one line on stdout.
  const protocol::CoordinatorReadyLine ready{coord.worker_endpoint(), coord.client_endpoint(), metrics.port(), url,
                                             getpid()};
  std::cout << "READY " << nlohmann::json(ready).dump() << std::endl;
  spdlog::info("coordinator serving workers on {}, clients on {}, /metrics on port {}", coord.worker_endpoint(),
               coord.client_endpoint(), metrics.port());
  Status s = coord.run(stop_flag());
  if (!s.ok()) {
    std::cerr << "autokernel coordinator: " << s.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace ak::cli
