// autokernel run: the whole farm on this machine. A private Redis (unless --redis), one
// coordinator process, one worker process per local GPU (or CPU workers where there is none),
// the campaign submitted, progress shown, results.tsv and results.json written, everything
// stopped again.
#include <spdlog/spdlog.h>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "cli/campaign_file.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "common/process.h"
#include "coordinator/campaign.h"
#include "coordinator/client.h"
#include "worker/device.h"

namespace ak::cli {

using nlohmann::json;

int run(const RunArgs& a) {
  std::filesystem::create_directories(a.data_dir);
  std::filesystem::create_directories(a.out_dir);
  // 1. Which backend: every local GPU, or the CPU.
  Backend backend = Backend::kCpu;
  std::vector<Capabilities> gpus;
  if (a.backend == "auto" || a.backend == "cuda") {
    auto g = detect_gpus();
    if (g.ok() && !g->empty()) {
      gpus = *g;
      backend = Backend::kCuda;
    } else if (a.backend == "cuda") {
      std::cerr << "autokernel run: --backend cuda but no GPU: "
                << (g.ok() ? std::string("the driver reports 0 devices") : g.status().message()) << "\n";
      return 1;
    } else {
      std::cout << "no GPU (" << (g.ok() ? std::string("0 devices") : g.status().message())
                << "); running on the CPU backend\n";
    }
  } else if (a.backend != "cpu") {
    std::cerr << "autokernel run: unknown --backend " << a.backend << "; expected auto, cpu or cuda\n";
    return 2;
  }
  if (!a.model.empty() && !a.campaign_files.empty()) {
    std::cerr << "autokernel run: --model and --campaign are exclusive: a model run plans its own campaigns\n";
    return 2;
  }
  std::vector<json> campaigns;
  for (const std::string& file : a.campaign_files) {
    auto doc = load_campaign_file(file);
    if (!doc.ok()) {
      std::cerr << "autokernel run: " << doc.status().message() << "\n";
      return 2;
    }
    campaigns.push_back(*doc);
  }
  if (campaigns.empty() && a.model.empty()) campaigns.push_back(default_campaign(backend));

  // 3. Coordinator process, on free loopback ports.
  const std::string self = self_exe_path();
  ChildProcess::Options capture;
  capture.capture_stdout = true;
  // Without --redis the coordinator starts (and later stops) a private redis-server under the
  // data dir.
  std::vector<std::string> coord_argv = {self, "coordinator", "--data-dir", a.data_dir, "--workers-bind",
                                         "tcp://127.0.0.1:*", "--clients-bind", "tcp://127.0.0.1:*", "--metrics",
                                         a.metrics_bind};
  if (!a.redis_url.empty()) coord_argv.insert(coord_argv.end(), {"--redis", a.redis_url});
  auto coord = ChildProcess::spawn(coord_argv, capture);
  if (!coord.ok()) {
    std::cerr << "autokernel run: " << coord.status().message() << "\n";
    return 1;
  }
  auto ready_line = coord->wait_for_line("READY ", std::chrono::seconds(30));
  if (!ready_line.ok()) {
    std::cerr << "autokernel run: coordinator did not come up: " << ready_line.status().message() << "\n";
    return 1;
  }
  auto ready = protocol::parse_reply<protocol::CoordinatorReadyLine>(
      json::parse(*ready_line, nullptr, /*allow_exceptions=*/false));
  if (!ready.ok()) {
    std::cerr << "autokernel run: coordinator sent an unreadable READY line: " << ready.status().message() << "\n";
    return 1;
  }
  const std::string workers_ep = ready->workers, clients_ep = ready->clients;
  std::cout << "coordinator up: workers " << workers_ep << ", clients " << clients_ep << ", /metrics on port "
            << ready->metrics_port << ", redis " << ready->redis << "\n";

  // 4. Workers: one process per GPU, or cpu_workers CPU workers. Each serves /metrics on the
  // coordinator's host: worker i on the coordinator's port + 1 + i (--metrics 0.0.0.0:9464 gives
  // 9465, 9466, ...), on an ephemeral port when the coordinator's is 0, none when it is empty.
  std::vector<ChildProcess> workers;
  auto worker_metrics = [&](size_t i) -> std::string {
    if (a.metrics_bind.empty()) return "";
    const auto colon = a.metrics_bind.rfind(':');
    const std::string host = colon == std::string::npos ? "127.0.0.1" : a.metrics_bind.substr(0, colon);
    int port = 0;
    try {
      port = std::stoi(colon == std::string::npos ? a.metrics_bind : a.metrics_bind.substr(colon + 1));
    } catch (const std::exception&) {
      port = 0;
    }
    return host + ":" + std::to_string(port > 0 ? port + 1 + static_cast<int>(i) : 0);
  };
  auto start_worker = [&](std::vector<std::string> extra) -> bool {
    std::vector<std::string> argv = {self,
                                     "worker",
                                     "--coordinator",
                                     workers_ep,
                                     "--cache-dir",
                                     a.data_dir + "/cache",
                                     "--state-dir",
                                     a.data_dir + "/worker",
                                     "--metrics",
                                     worker_metrics(workers.size())};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto w = ChildProcess::spawn(argv, {});
    if (!w.ok()) {
      std::cerr << "autokernel run: " << w.status().message() << "\n";
      return false;
    }
    workers.push_back(std::move(*w));
    return true;
  };
  if (backend == Backend::kCuda) {
    for (const auto& g : gpus)
      if (!start_worker({"--backend", "cuda", "--gpus", std::to_string(g.device_index)})) return 1;
    std::cout << "workers: " << gpus.size() << " (one per GPU: " << gpus.front().gpu_name << ")\n";
  } else {
    for (int i = 0; i < std::max(1, a.cpu_workers); ++i)
      if (!start_worker({"--backend", "cpu", "--id", local_hostname() + "-cpu" + std::to_string(i)})) return 1;
    std::cout << "workers: " << std::max(1, a.cpu_workers) << " (cpu)\n";
  }

  // 5. Submit, follow, export.
  CoordinatorClient client(clients_ep, std::chrono::seconds(30));
  int rc = 0;
  std::vector<protocol::ResultRow> all_rows;
  if (!a.model.empty()) {
    // The model pipeline (cli/model_command.cc), then the results of the campaigns it ran.
    RunArgs m = a;
    if (!a.dtype_given && backend == Backend::kCpu) m.dtype = "fp32";  // the CPU kernels' dtype
    ClientArgs c;
    c.endpoint = clients_ep;
    // The campaigns a reused data dir already holds are not this run's.
    std::set<std::string> earlier;
    if (auto st = client.status(); st.ok())
      for (const auto& cs : st->campaigns) earlier.insert(cs.campaign_id);
    rc = run_model_pipeline(c, m, backend_name(backend));
    if (auto st = client.status(); st.ok())
      for (const auto& cs : st->campaigns)
        if (!earlier.count(cs.campaign_id))
          if (auto rows = client.results(cs.campaign_id, ""); rows.ok())
            for (auto& r : rows->rows) all_rows.push_back(std::move(r));
  }
  for (const json& campaign : campaigns) {
    if (rc != 0) break;
    auto sub = client.submit(campaign);
    if (!sub.ok()) {
      std::cerr << "autokernel run: campaign rejected: " << sub.status().message() << "\n";
      rc = 1;
      break;
    }
    const std::string cid = sub->campaign_id;
    std::cout << "campaign " << cid << " (" << sub->name << "): " << sub->jobs << " jobs\n";
    if (!wait_for_campaign(client, cid, stop_flag())) rc = 1;
    // A study campaign's final table (per study: trials, best, speedup over PyTorch, why it
    // stopped; the end-to-end estimate), printed and kept as studies-<campaign>.json.
    if (auto st = client.status(); st.ok())
      for (const auto& c : st->campaigns)
        if (c.campaign_id == cid && c.is_study) {
          std::cout << format_studies(c);
          std::ofstream(a.out_dir + "/studies-" + cid + ".json") << json(c).dump(1) << "\n";
        }
    auto rows = client.results(cid, "");
    if (!rows.ok()) {
      std::cerr << "autokernel run: could not fetch results: " << rows.status().message() << "\n";
      rc = 1;
      break;
    }
    for (auto& r : rows->rows) all_rows.push_back(std::move(r));
    if (rc != 0) break;  // interrupted
  }
  const std::string tsv = a.out_dir + "/results.tsv", js = a.out_dir + "/results.json";
  Status s = write_exports(all_rows, tsv, js);
  if (!s.ok()) {
    std::cerr << "autokernel run: " << s.message() << "\n";
    rc = 1;
  } else {
    std::cout << format_results(all_rows, 40);
    std::cout << "wrote " << all_rows.size() << " rows to " << tsv << " and " << js << "\n";
  }
  // The tuning database as this run leaves it (the private Redis may hold earlier runs' entries
  // too): the file kernels/tuned.h loads and `autokernel best --import` merges into another farm.
  if (auto best = client.best(TuningQuery{}); best.ok()) {
    const std::string path = a.out_dir + "/tuning.json";
    if (Status w = write_tuning_export(*best, path); w.ok())
      std::cout << "wrote " << best->entries.size() << " tuning-database entries to " << path << "\n";
    else
      std::cerr << "autokernel run: " << w.message() << "\n";
  } else {
    std::cerr << "autokernel run: could not fetch the tuning database: " << best.status().message() << "\n";
  }
  for (auto& w : workers) w.signal(SIGTERM);
  for (auto& w : workers) w.stop(std::chrono::seconds(10));
  coord->stop(std::chrono::seconds(10));
  return rc;
}

}  // namespace ak::cli
