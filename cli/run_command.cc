// autokernel run: the whole farm on this machine. A private Redis (unless --redis), one
// coordinator process, one worker process per local GPU (or CPU workers where there is none),
// the campaign submitted, progress shown, rows appended to results.tsv and results.json,
// everything stopped again; also when SIGINT or SIGTERM asks it to stop part-way (issue 22).
#include <spdlog/spdlog.h>

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "cli/campaign_file.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "common/process.h"
#include "common/stop_signal.h"
#include "coordinator/campaign.h"
#include "coordinator/client.h"
#include "worker/device.h"

namespace ak::cli {

using nlohmann::json;

namespace {

// How long the parts of a stop after SIGINT or SIGTERM may take: together well inside the 5 s a
// user waits for (issue 22). A worker still busy after its grace is killed with its process group
// (its job's lease expires; the job is cancelled or runs again later).
constexpr std::chrono::milliseconds kWorkerGrace{1500};
constexpr std::chrono::milliseconds kDisconnectWait{500};
constexpr std::chrono::milliseconds kStopRequestTimeout{1000};
constexpr std::chrono::milliseconds kCoordinatorGrace{1500};
// What a stop may take before the coordinator's grace: the workers' grace, the disconnect wait and
// the requests (results, status, cancel). A cancel of many queued jobs takes the coordinator a
// while; it gets what is left of this, at least kStopRequestTimeout.
constexpr std::chrono::milliseconds kStopBudget{3500};
// The whole stop after a signal, counted from the signal, the coordinator's exit included, aimed
// inside the 5 s a user waits for: the coordinator's grace is what is left of this (at least
// kCoordinatorGraceMin; its Redis fsyncs every write, so a coordinator killed at the end of its
// grace loses nothing). Requests that each take their whole timeout can still overrun it.
constexpr std::chrono::milliseconds kStopTotal{4500};
constexpr std::chrono::milliseconds kCoordinatorGraceMin{300};
// After a run that ended by itself: the last measurements and Redis's shutdown may take longer.
constexpr std::chrono::milliseconds kWorkerGraceAtEnd{10'000};
constexpr std::chrono::milliseconds kCoordinatorGraceAtEnd{10'000};

const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "stop signal"; }

// SIGTERM to every worker, then each waited for until `deadline`; then what is left of each
// worker's process group (the worker itself when it is still running, a compiler or sandbox of
// its) is killed. Returns how many workers ended by themselves.
size_t stop_workers(std::vector<ChildProcess>& workers, std::chrono::steady_clock::time_point deadline) {
  for (auto& w : workers) w.signal(SIGTERM);
  size_t clean = 0;
  for (auto& w : workers) {
    if (w.wait_until(deadline)) ++clean;
    w.kill_group();
  }
  return clean;
}

}  // namespace

int run(const RunArgs& a) {
  if (a.inherit_env && !a.unconfined) {
    std::cerr
        << "autokernel run: --inherit-env needs --unconfined (a confined candidate gets a scrubbed environment)\n";
    return 2;
  }
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

  // 3. Coordinator process, on free loopback ports. It and the workers lead process groups of
  // their own: a Ctrl-C (SIGINT to the terminal's foreground group) or a SIGTERM to this run's
  // group reaches only this process, which then stops them in order (workers first, so that no
  // new job starts, and the coordinator last, once the rows are exported). Their death signal
  // ends them should this process die without that.
  const std::string self = self_exe_path();
  ChildProcess::Options capture;
  capture.capture_stdout = true;
  capture.new_process_group = true;
  // Without --redis the coordinator starts (and later stops) a private redis-server under the
  // data dir.
  std::vector<std::string> coord_argv = {self, "coordinator", "--data-dir", a.data_dir, "--workers-bind",
                                         "tcp://127.0.0.1:*", "--clients-bind", "tcp://127.0.0.1:*", "--metrics",
                                         a.metrics_bind};
  if (!a.redis_url.empty()) coord_argv.insert(coord_argv.end(), {"--redis", a.redis_url});
  // From here a second SIGINT or SIGTERM ends this process at once (common/stop_signal.h).
  exit_on_second_stop_signal();
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
  CoordinatorClient client(clients_ep, std::chrono::seconds(30));

  // 4. What an earlier run left in the data dir: campaigns stopped with --keep-queue, or by a
  // run that was killed. Resumed (this run follows them to their end and exports their rows)
  // unless --cancel-leftover.
  std::vector<std::string> mine;  // the campaigns this run follows, exports, and cancels or keeps
  if (auto st = client.status(); st.ok()) {
    std::vector<protocol::CampaignRow> left;
    for (const auto& c : st->campaigns)
      if (!c.complete && !c.cancelled) left.push_back(c);
    if (!left.empty()) {
      std::cout << "found " << left.size() << " unfinished campaign(s) of an earlier run in " << a.data_dir << ":\n";
      for (const auto& c : left)
        std::cout << "  " << c.campaign_id << " (" << c.name << "): " << (c.total - c.finished) << " of " << c.total
                  << " jobs left\n";
      if (a.cancel_leftover) {
        for (const auto& c : left) {
          auto r = client.cancel(c.campaign_id, "cancelled by autokernel run --cancel-leftover");
          if (r.ok())
            std::cout << "cancelled " << c.campaign_id << " (--cancel-leftover): " << (r->cancelled + r->stopping)
                      << " jobs will not run\n";
          else
            std::cerr << "autokernel run: could not cancel " << c.campaign_id << ": " << r.status().message() << "\n";
        }
      } else {
        std::cout << "resuming them: this run finishes them first and adds their rows to results.tsv "
                     "(--cancel-leftover cancels them instead)\n";
        for (const auto& c : left) mine.push_back(c.campaign_id);
      }
    }
  } else {
    std::cerr << "autokernel run: the coordinator does not answer: " << st.status().message() << "\n";
    return 1;
  }

  // 5. Workers: one process per GPU, or cpu_workers CPU workers. Each serves /metrics on the
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
    if (!a.python.empty()) argv.insert(argv.end(), {"--python", a.python});
    if (a.unconfined) argv.push_back("--unconfined");
    if (a.inherit_env) argv.push_back("--inherit-env");
    ChildProcess::Options o;
    o.new_process_group = true;
    auto w = ChildProcess::spawn(argv, o);
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

  // 6. Follow the leftovers, then submit and follow this run's campaigns, until done or stopped.
  int rc = 0;
  // While run waits, a watcher sets `end` on a stop signal or when every worker has exited (one
  // that cannot start its sandbox or confine a child, say): the wait would otherwise go on forever.
  auto watch = [&](std::atomic<bool>& end, std::atomic<bool>& gone, std::atomic<bool>& waited) {
    return std::thread([&] {
      while (!waited.load() && !workers.empty()) {
        if (stop_flag().load()) end.store(true);
        ChildProcess* alive = nullptr;
        for (auto& w : workers)
          if (!w.wait_for(std::chrono::milliseconds(0))) {
            alive = &w;
            break;
          }
        if (alive == nullptr) {
          gone.store(true);
          end.store(true);
          return;
        }
        alive->wait_for(std::chrono::milliseconds(200));  // paces the loop: returns early if it exits
      }
    });
  };
  auto say_workers_gone = [&] {
    std::cerr << "autokernel run: every worker has exited (";
    for (size_t i = 0; i < workers.size(); ++i)
      std::cerr << (i ? ", " : "") << "worker " << i << ": exit code " << workers[i].wait();
    std::cerr << "); their log lines above say why\n";
  };
  auto follow = [&](const std::string& cid) {
    std::atomic<bool> end_wait{false}, gone{false}, waited{false};
    std::thread watcher = watch(end_wait, gone, waited);
    const bool complete =
        wait_for_campaign(client, cid, workers.empty() ? stop_flag() : end_wait,
                          std::chrono::steady_clock::time_point::max(), static_cast<int>(workers.size()));
    waited.store(true);
    watcher.join();
    if (gone.load() && !complete) say_workers_gone();
    if (!complete) return false;
    // A study campaign's final table (per study: trials, best, speedup over PyTorch, why it
    // stopped; the end-to-end estimate), printed and kept as studies-<campaign>.json.
    if (auto st = client.status(); st.ok())
      for (const auto& c : st->campaigns)
        if (c.campaign_id == cid && c.is_study) {
          std::cout << format_studies(c);
          std::ofstream(a.out_dir + "/studies-" + cid + ".json") << json(c).dump(1) << "\n";
        }
    return true;
  };
  for (const std::string& cid : std::vector<std::string>(mine))
    if (rc == 0 && !follow(cid)) rc = 1;
  if (rc == 0 && !a.model.empty()) {
    // The model pipeline (cli/model_command.cc), then the results of the campaigns it ran.
    RunArgs m = a;
    if (!a.dtype_given && backend == Backend::kCpu) m.dtype = "fp32";  // the CPU kernels' dtype
    ClientArgs c;
    c.endpoint = clients_ep;
    // The campaigns a reused data dir already holds are not this run's.
    std::set<std::string> earlier;
    if (auto st = client.status(); st.ok())
      for (const auto& cs : st->campaigns) earlier.insert(cs.campaign_id);
    // The pipeline's waits end on the stop flag: the watcher sets it when every worker is gone.
    std::atomic<bool> gone{false}, waited{false};
    std::thread watcher = watch(stop_flag(), gone, waited);
    rc = run_model_pipeline(c, m, backend_name(backend));
    waited.store(true);
    watcher.join();
    if (gone.load()) {
      say_workers_gone();
      rc = 1;
    }
    if (auto st = client.status(); st.ok())
      for (const auto& cs : st->campaigns)
        if (!earlier.count(cs.campaign_id)) mine.push_back(cs.campaign_id);
  }
  for (const json& campaign : campaigns) {
    if (rc != 0 || stop_flag().load()) break;
    auto sub = client.submit(campaign);
    if (!sub.ok()) {
      std::cerr << "autokernel run: campaign rejected: " << sub.status().message() << "\n";
      rc = 1;
      break;
    }
    const std::string cid = sub->campaign_id;
    mine.push_back(cid);
    std::cout << "campaign " << cid << " (" << sub->name << "): " << sub->jobs << " jobs\n";
    if (!follow(cid)) rc = 1;
  }

  // 7. Stopped by a signal: the workers first, with a short grace (no new job starts; a job that
  // finishes meanwhile is reported), so that every row stored from here on is final. Requests
  // from here wait for nobody long.
  // Stopping: by a signal, or because every worker exited during the model pipeline (no signal).
  const int stop_sig = stop_flag().load() ? std::max(stop_signal_number(), 1) : 0;
  const bool by_signal = stop_signal_number() != 0;
  const std::string stop_cause = by_signal ? signal_name(stop_sig) : std::string("no worker left");
  CoordinatorClient quick(clients_ep, kStopRequestTimeout);
  CoordinatorClient& farm = stop_sig ? quick : client;
  const auto stop_start = stop_signal_time().value_or(std::chrono::steady_clock::now());
  const auto stop_deadline = stop_start + kStopBudget;
  if (stop_sig) {
    std::cout << "\n"
              << stop_cause << ": stopping (a second stop signal ends it at once, killing the farm)\n"
              << std::flush;
    const size_t clean = stop_workers(workers, std::chrono::steady_clock::now() + kWorkerGrace);
    // A worker's last results travel before its DISCONNECT on the same connection: once the
    // coordinator lists no worker, they are stored.
    if (clean > 0) {
      const auto deadline = std::chrono::steady_clock::now() + kDisconnectWait;
      int64_t version = -1;
      while (std::chrono::steady_clock::now() < deadline) {
        auto st = version < 0 ? farm.status() : farm.status_after(version, std::chrono::milliseconds(100));
        if (!st.ok()) break;
        version = st->version;
        if (st->workers.empty()) break;
      }
    }
  }

  // 8. Every finished row of this run's campaigns, appended to results.tsv and results.json.
  std::vector<protocol::ResultRow> all_rows;
  std::map<std::string, int64_t> exported;  // rows by campaign: the stop line's count of finished jobs
  for (const std::string& cid : mine) {
    auto rows = farm.results(cid, "");
    if (!rows.ok()) {
      std::cerr << "autokernel run: could not fetch the results of " << cid << ": " << rows.status().message() << "\n";
      rc = 1;
      continue;
    }
    exported[cid] = static_cast<int64_t>(rows->rows.size());
    for (auto& r : rows->rows) all_rows.push_back(std::move(r));
  }

  // 9. After a stop: the unfinished campaigns cancelled, or kept for the next run (--keep-queue).
  if (stop_sig) {
    std::vector<protocol::CampaignRow> unfinished;
    if (auto st = farm.status(); st.ok()) {
      for (const std::string& cid : mine)
        for (const auto& c : st->campaigns)
          if (c.campaign_id == cid && !c.complete) unfinished.push_back(c);
    } else {
      std::cerr << "autokernel run: the coordinator does not answer: " << st.status().message() << "\n";
    }
    if (unfinished.empty() && !mine.empty()) std::cout << "every campaign of this run had finished\n";
    for (const auto& c : unfinished) {
      // Finished as exported to results.tsv. A result still on its way from a killed worker when
      // the rows were fetched is stored but not exported: said here, with where to find it.
      const auto e = exported.find(c.campaign_id);
      const int64_t finished = e != exported.end() ? std::min(e->second, c.finished) : c.finished;
      const int64_t left = c.total - c.finished;
      std::cout << "campaign " << c.campaign_id << " (" << c.name << "): " << finished << " of " << c.total
                << " jobs finished";
      if (e == exported.end())
        std::cout << " (none of their rows fetched)";
      else if (c.finished > finished)
        std::cout << " (and " << c.finished - finished << " more stored in " << a.data_dir
                  << " after the rows were exported)";
      std::cout << ", " << left << " left: ";
      if (a.keep_queue) {
        std::cout << "kept in the queue of " << a.data_dir
                  << " (--keep-queue); the next autokernel run with --data-dir " << a.data_dir << " resumes it\n";
        continue;
      }
      const auto left_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(stop_deadline - std::chrono::steady_clock::now());
      CoordinatorClient canceller(clients_ep, std::max(kStopRequestTimeout, left_ms));
      auto r = canceller.cancel(c.campaign_id, std::string("autokernel run stopped: ") + stop_cause);
      if (r.ok())
        std::cout << "cancelled (--keep-queue would keep it for the next run)\n";
      else
        std::cout << "NOT cancelled: " << r.status().message() << "\n";
    }
  }

  const std::string tsv = a.out_dir + "/results.tsv", js = a.out_dir + "/results.json";
  auto added = append_exports(all_rows, tsv, js);
  if (!added.ok()) {
    std::cerr << "autokernel run: " << added.status().message() << "\n";
    rc = 1;
  } else {
    std::cout << format_results(all_rows, 40);
    std::cout << "wrote " << all_rows.size() << " rows (" << *added << " new) to " << tsv << " and " << js << "\n";
  }
  // The tuning database as this run leaves it (the private Redis may hold earlier runs' entries
  // too): the file kernels/tuned.h loads and `autokernel best --import` merges into another farm.
  if (auto best = farm.best(TuningQuery{}); best.ok()) {
    const std::string path = a.out_dir + "/tuning.json";
    if (Status w = write_tuning_export(*best, path); w.ok())
      std::cout << "wrote " << best->entries.size() << " tuning-database entries to " << path << "\n";
    else
      std::cerr << "autokernel run: " << w.message() << "\n";
  } else {
    std::cerr << "autokernel run: could not fetch the tuning database: " << best.status().message() << "\n";
  }
  std::cout << std::flush;
  if (!stop_sig) stop_workers(workers, std::chrono::steady_clock::now() + kWorkerGraceAtEnd);
  const auto left_of_stop =
      std::chrono::duration_cast<std::chrono::milliseconds>(stop_start + kStopTotal - std::chrono::steady_clock::now());
  coord->stop(by_signal  ? std::clamp(left_of_stop, kCoordinatorGraceMin, kCoordinatorGrace)
              : stop_sig ? kCoordinatorGrace
                         : kCoordinatorGraceAtEnd);
  return stop_sig && by_signal ? 128 + stop_sig : stop_sig ? std::max(rc, 1) : rc;
}

}  // namespace ak::cli
