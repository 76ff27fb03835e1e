// The autokernel subcommands. Each takes its parsed options, assembles the objects it needs and
// runs them; main.cc only parses the command line. Each returns the process exit code
// (0 success, 1 failure, 2 bad usage) after printing a clear message on failure.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "common/stop_signal.h"
#include "common/tuning.h"
#include "coordinator/client.h"

namespace ak::cli {

// Long-running commands stop cleanly when ak::stop_flag() (common/stop_signal.h) becomes true.

struct CoordinatorArgs {
  std::string redis_url;   // empty: start a private redis-server in data_dir/redis
  std::string data_dir = ".ak";
  // Empty: tcp://*:5555 and tcp://*:5556 with CURVE keys, tcp://127.0.0.1:5555 and :5556 without.
  std::string workers_bind;
  std::string clients_bind;
  std::string metrics_bind = "127.0.0.1:9464";  // empty: do not serve /metrics
  // CURVE (PROTOCOL.md, "Authentication"): the coordinator's secret key file and the allow-lists.
  // None: no authentication, loopback only unless `insecure`.
  std::string curve_secret;
  std::string allow_workers;
  std::string allow_clients;
  bool insecure = false;
  int64_t lease_ms = 10'000;
  int64_t worker_timeout_ms = 15'000;
  int max_attempts = 3;
  int64_t max_jobs_per_submit = 20'000;
  int64_t max_jobs_per_campaign = 20'000;
  double client_requests_per_s = 100;  // per peer address; bursts of twice this
};
int coordinator(const CoordinatorArgs& a);

struct WorkerArgs {
  std::string coordinator = "tcp://127.0.0.1:5555";
  std::string key_file;              // this worker's CURVE secret key file (NAME.key); empty: no CURVE
  std::string coordinator_key_file;  // the coordinator's public key file (NAME.pub)
  std::string backend = "auto";  // auto: cuda on every GPU if any, else cpu
  std::string gpus = "all";      // "all" or a comma list of CUDA ordinals
  std::string id;                // empty: make_worker_agent claims <hostname>-<backend><device>[-N]
  int slots = 0;                 // 0: automatic (worker/agent.h, agent_parallelism)
  int compile_threads = 0;       // 0: automatic
  std::string cache_dir = ".ak/cache";
  // The Python of triton compiles, KernelBench and model jobs, whose torch the sandbox loads
  // (cli/python_env.h): --python, else python_env (AK_PYTHON), else the build's default, else PATH.
  std::string python;
  std::string python_env;
  std::string state_dir = ".ak/worker";
  std::string sandbox;           // default: autokernel-sandbox next to this executable
  int64_t heartbeat_ms = 500;
  int kb_slots = 1;              // KernelBench jobs at once per GPU
  bool kb_fork_server = false;    // harness steps forked from one process that imported torch once
  bool unconfined = false;        // run candidates with the worker's rights (common/confine.h)
  bool inherit_env = false;       // with unconfined: sandboxes get this environment (inherited_env)
  bool confinement_report = false;  // print which confinement layers this machine allows, then exit
  int64_t candidate_memory_mb = 0;  // cgroup memory limit per sandbox / step; 0: none
  int64_t candidate_pids = 4096;    // cgroup pids limit (tasks: threads count) per sandbox / step; 0: none
  // /metrics of this worker process (worker/metrics.h), host:port; a bare port means 127.0.0.1;
  // empty: not served. When the default's port is taken (a second worker on the host), the worker
  // serves none and says so; a port given explicitly that cannot be bound stops the worker.
  std::string metrics_bind = kDefaultWorkerMetrics;
  static constexpr const char* kDefaultWorkerMetrics = "127.0.0.1:9465";
};
int worker(const WorkerArgs& a);

struct ClientArgs {
  std::string endpoint = "tcp://127.0.0.1:5556";
  int64_t timeout_ms = 30'000;
  CurveClientKeys curve;  // main reads them from --key and --coordinator-key (AK_CLIENT_KEY, AK_COORDINATOR_KEY)
};
// allow_source_outside: a source_file may lie anywhere (cli/campaign_file.h).
int submit(const ClientArgs& c, const std::string& campaign_file, bool wait, bool allow_source_outside = false);
int status(const ClientArgs& c, bool json);
int cancel(const ClientArgs& c, const std::string& campaign_id, const std::string& reason);
struct ResultsFilter {
  std::string campaign_id, status, kernel_type, shape, gpu_model;  // empty: all
};
int results(const ClientArgs& c, const ResultsFilter& f, bool json, int limit);

struct BestArgs {
  TuningQuery query;
  std::string export_path;  // write the matching entries here
  std::string import_path;  // merge this file first
  bool json = false;
};
int best(const ClientArgs& c, const BestArgs& a);
int export_results(const ClientArgs& c, const std::string& campaign, const std::string& tsv_path,
                   const std::string& json_path);

// autokernel kb baseline | sweep (cli/kernelbench_command.cc).
struct KbArgs {
  std::string kernelbench;      // a KernelBench checkout (or a folder of level<N>/ problems)
  std::string generations;      // sweep: folder of level_<L>_problem_<P>_sample_<S>_kernel.py
  bool builtin = false;         // sweep: the kernel library's built-in candidates instead (kernelbench/builtin.h)
  std::string tuning;           // sweep --builtin: tuning database export; empty: the specs' defaults
  // sweep: KernelBench baseline files scored against beside the farm's
  std::vector<std::string> baseline_files;
  std::string python = "python3";  // with pyarrow, to read the Hugging Face dataset's files
  std::string levels = "1-3";   // ranges
  std::string ids;              // problem id ranges; empty: all
  std::vector<std::string> baselines = {"eager", "compile"};
  // baseline: leave out the problems the baseline files in --out already hold in every mode asked
  // for (of the one GPU model; cpu on cpu workers), so a sweep stopped part-way goes on from there
  bool skip_measured = false;
  std::string backend = "cuda";  // the workers that run it: cuda or cpu
  std::vector<std::string> gpu_models;
  std::string sample_backend = "cuda";  // the candidates': cuda (load_inline), triton or torch
  std::string precision = "fp32";
  int correct_trials = 5;
  int perf_trials = 100;
  int64_t timeout_ms = 180'000;
  bool cancel_at_stop = false;  // cancel the campaign when the wait ends before it does
  double wait_s = 0;  // stop following the campaign after this long and write what finished; 0: until done
  bool strict = true;
  bool keep_integer_inputs = true;
  std::string name;
  std::string out = "kernelbench-out";
  std::vector<std::string> eval_files;  // score: eval_results.json files, the level from each path
  std::string score_json;               // score: where to write the scores (scores.json's form)
  std::string score_levels;             // score --levels: empty, every level with a file
};
int kb_baseline(const ClientArgs& c, const KbArgs& a);

// autokernel profile (cli/model_command.cc): a model's profile as a farm job.
struct ProfileArgs {
  std::string model;  // a model file, examples/NAME[:CONFIG] or hf:ARCH
  std::string backend = "cuda";
  std::string gpu_model;  // empty: any worker of the backend
  std::string dtype = "bf16";
  bool compile = false;
  int iters = 5;
  int warmup = 3;
  int64_t timeout_ms = 600'000;
  int top = 25;          // rows of the table
  double wait_s = 0;     // stop waiting after this long [s]; 0: until the job ends
  std::string json_out;  // the profile documents, as an array; empty: none
};
int profile(const ClientArgs& c, const ProfileArgs& a);

// autokernel verify (cli/model_command.cc): the tuned kernels plugged into the model on a worker;
// outputs, greedy decoding and end-to-end time against eager and torch.compile (models/README.md).
struct VerifyArgs {
  std::string model;    // as ProfileArgs::model
  std::string tuned;    // `autokernel best --export` output; empty: the farm's whole tuning database
  std::string profile;  // `autokernel profile --json` output, for the Amdahl prediction; may be empty
  std::string backend = "cuda";
  std::string gpu_model;
  std::string dtype = "bf16";
  bool compile = true;  // time torch.compile too
  int iters = 20;
  int warmup = 5;
  int decode_tokens = 32;
  double min_speedup = 1.0;  // plug in only kernels faster than PyTorch's op by more than this
  int64_t timeout_ms = 1'800'000;
  double wait_s = 0;
  std::string json_out;  // the reports, as an array
};
int verify(const ClientArgs& c, const VerifyArgs& a);

// autokernel export --hf DIR (cli/model_command.cc, models/export/README.md): the tuned cuda and
// triton kernels of one GPU model, compiled here for their architecture, written as a Hugging Face
// Kernels package and, with build, built.
struct ExportArgs {
  std::string hf_dir;
  std::string tuned;      // `autokernel best --export` output; empty: the farm's tuning database
  std::string gpu_model;  // empty: the one GPU model the entries have
  std::string arch;       // empty: the entries' ("sm_90a")
  std::string name = "autokernel_tuned";
  double min_speedup = 1.0;
  bool build = false;
  std::string python;       // --python; as the worker chooses it (cli/python_env.h)
  std::string python_env;   // AK_PYTHON
  std::string ops_library;  // empty: default_ops_library()
  bool unconfined = false;  // compile the entries' sources without confinement (common/confine.h)
};
int export_hf(const ClientArgs& c, const ExportArgs& a);

// autokernel extract (cli/model_command.cc, cli/extract.h): a profile's targets as a study campaign.
struct ExtractArgs {
  std::string profile;  // `autokernel profile --json` output
  std::string backend = "cuda";
  std::string gpu_model;  // empty: the profile's GPU
  double min_share = 0.005;
  int budget_trials = 32;
  std::string out;  // the study campaign (JSON); empty: stdout
};
int extract(const ExtractArgs& a);
int kb_sweep(const ClientArgs& c, const KbArgs& a);
// Offline: fast_p of a sweep's eval_results files against baseline files; no farm needed.
int kb_score(const KbArgs& a);

struct RunArgs {
  // Run one after the other, the rows of all appended to results.tsv; empty: the default softmax
  // campaign for the local backend.
  std::vector<std::string> campaign_files;
  std::string redis_url;
  std::string data_dir = ".ak";
  std::string out_dir = ".";
  std::string backend = "auto";
  int cpu_workers = 1;
  std::string metrics_bind = "127.0.0.1:0";
  // --model: profile -> extract -> the studies -> verify, unattended, instead of campaign files
  // (run_model_pipeline below); its reports go to out_dir.
  std::string model;
  std::string dtype = "bf16";  // the model's; fp32 on the cpu backend unless given
  bool dtype_given = false;
  int budget_trials = 32;  // per study
  double min_share = 0.005;
  int verify_iters = 20;
  double min_speedup = 1.0;
  bool verify_compile = true;
  // Stopped by SIGINT or SIGTERM: keep the unfinished campaigns queued in data_dir for the next
  // run instead of cancelling them.
  bool keep_queue = false;
  // Unfinished campaigns an earlier run left in data_dir are cancelled instead of resumed.
  bool cancel_leftover = false;
  std::string python;  // passed to the workers as --python; empty: theirs (WorkerArgs)
  bool unconfined = false;   // passed to the workers (WorkerArgs)
  bool inherit_env = false;  // passed to the workers (WorkerArgs); needs unconfined
};
// Stops on SIGINT or SIGTERM (to it alone or to its process group) within a few seconds: the
// workers first, then every finished row appended to the exports, the unfinished campaigns
// cancelled (or kept: keep_queue), the coordinator last; returns 128 + the signal's number then.
// A second signal ends it at once.
int run(const RunArgs& a);
// The --model pipeline of `run` on a farm that is up, with workers of `backend`.
int run_model_pipeline(const ClientArgs& c, const RunArgs& a, const std::string& backend);

// autokernel kernels [TYPE] / starter TYPE --backend B / check FILE... (cli/kernels_command.cc):
// offline, no farm.
int kernels_list(const std::string& type);  // "" lists every type
int starter(const std::string& type, const std::string& backend);
// Each file checked by the coordinator's planner: "ok, ..." or the error naming the key; 2 if any fails.
int check(const std::vector<std::string>& files, bool allow_source_outside);

struct CalibrateArgs {
  std::string backend = "auto";
  int device = 0;
  std::string sandbox;  // default: autokernel-sandbox next to this executable
  std::string python, python_env;  // whose torch the sandbox loads, as WorkerArgs
  bool json = false;
};
int calibrate(const CalibrateArgs& a);

// autokernel keys generate NAME [--dir DIR] (cli/keys_command.cc): NAME.key (mode 0600), NAME.pub.
int keys_generate(const std::string& name, const std::string& dir);
// Reads the client's key files into c->curve; both or neither must be given. 0, or 2 after a message.
int load_client_keys(const std::string& key_file, const std::string& coordinator_key_file, ClientArgs* c);

}  // namespace ak::cli
