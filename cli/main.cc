// autokernel: the farm's one command line. main only parses and dispatches.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstdlib>

#include "cli/commands.h"

int main(int argc, char** argv) {
  using namespace ak::cli;
  CLI::App app{"autokernel: a farm of GPU workers that search for faster kernels and verify and time every candidate"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("autokernel ") + AK_VERSION);
  // Options of the app (--log-level) also after the subcommand: `autokernel status --log-level debug`.
  app.fallthrough();
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")->capture_default_str();

  RunArgs run_args;
  auto* run = app.add_subcommand("run", "All in one on this machine: Redis, a coordinator, a worker per GPU (or CPU workers), a campaign, results.tsv");
  run->add_option("--campaign", run_args.campaign_files, "campaign file (.json or .toml), repeatable: run in order, one results.tsv; default: the softmax campaign for the local backend");
  run->add_option("--redis", run_args.redis_url, "redis://host:port or unix:///path; default: a private redis-server with AOF under --data-dir");
  run->add_option("--data-dir", run_args.data_dir, "state: Redis data, compile cache, worker outboxes")->capture_default_str();
  run->add_option("--out", run_args.out_dir,
                  "where results.tsv and results.json go: a log across runs, each run appends its rows (the experiment "
                  "number goes on)")
      ->capture_default_str();
  run->add_flag(
      "--keep-queue", run_args.keep_queue,
      "when stopped by Ctrl-C / SIGINT or SIGTERM: keep the unfinished campaigns queued in --data-dir for the "
      "next run (default: cancel them); the finished rows are written either way");
  run->add_flag("--cancel-leftover", run_args.cancel_leftover,
                "cancel the unfinished campaigns an earlier run left in --data-dir (default: resume them: this run "
                "finishes them first and adds their rows)");
  run->add_option("--backend", run_args.backend, "auto, cpu or cuda")->capture_default_str();
  run->add_option("--python", run_args.python, "the workers' --python (autokernel worker --help)");
  run->add_flag("--unconfined", run_args.unconfined, "the workers' --unconfined (autokernel worker --help)");
  run->add_flag("--inherit-env", run_args.inherit_env,
                "the workers' --inherit-env, with --unconfined: a profiler's injection reaches the candidates, e.g. "
                "ncu --target-processes all -k regex:ak_ autokernel run --unconfined --inherit-env ...");
  run->add_option("--cpu-workers", run_args.cpu_workers, "CPU worker processes when there is no GPU")->capture_default_str();
  run->add_option("--metrics", run_args.metrics_bind,
                  "address for the coordinator's /metrics; worker i serves its own on port + 1 + i of the same "
                  "host (ephemeral ports for port 0, none when empty)")
      ->capture_default_str();
  run->add_option("--model", run_args.model,
                  "instead of campaigns: profile -> extract -> optimize -> verify this model (a model file, "
                  "examples/NAME[:CONFIG] or hf:ARCH; models/README.md)");
  auto* run_dtype =
      run->add_option("--dtype", run_args.dtype, "--model: fp32, fp16 or bf16 (default bf16; fp32 on the cpu backend)");
  run->add_option("--budget-trials", run_args.budget_trials, "--model: trials per study")->capture_default_str();
  run->add_option("--min-share", run_args.min_share, "--model: leave out targets with a smaller share")
      ->capture_default_str();
  run->add_option("--verify-iters", run_args.verify_iters, "--model: timed rounds of the verify")
      ->capture_default_str();
  run->add_flag("!--no-compile", run_args.verify_compile, "--model: do not time torch.compile in the verify");
  run->add_option("--min-speedup", run_args.min_speedup,
                  "--model: plug in only kernels faster than PyTorch's op by more than this; 0: all")
      ->capture_default_str();

  CoordinatorArgs co;
  auto* coord = app.add_subcommand("coordinator", "Serve workers and clients; write everything through to Redis; /metrics");
  coord->add_option("--redis", co.redis_url, "redis://host:port[/db] or unix:///path; default: a private redis-server");
  coord->add_option("--data-dir", co.data_dir, "where a private Redis keeps its AOF")->capture_default_str();
  coord->add_option(
      "--workers-bind", co.workers_bind,
      "ZeroMQ endpoint for workers (default: tcp://*:5555 with CURVE keys, tcp://127.0.0.1:5555 without)");
  coord->add_option(
      "--clients-bind", co.clients_bind,
      "ZeroMQ endpoint for the CLI (default: tcp://*:5556 with CURVE keys, tcp://127.0.0.1:5556 without)");
  coord
      ->add_option("--metrics", co.metrics_bind,
                   "host:port for Prometheus /metrics (give 0.0.0.0:9464 to serve beyond this host); empty to disable")
      ->capture_default_str();
  coord
      ->add_option("--curve-secret", co.curve_secret,
                   "this coordinator's CURVE secret key file (autokernel keys generate NAME): workers and clients must "
                   "then authenticate")
      ->check(CLI::ExistingFile);
  coord
      ->add_option("--allow-workers", co.allow_workers,
                   "worker public keys allowed in, one per line (with --curve-secret)")
      ->check(CLI::ExistingFile);
  coord
      ->add_option("--allow-clients", co.allow_clients,
                   "client public keys allowed in, one per line, each with an optional role: submit (default) or admin")
      ->check(CLI::ExistingFile);
  coord->add_flag("--insecure", co.insecure,
                  "without CURVE keys, bind the endpoints given even beyond loopback: every peer that reaches them may "
                  "submit code, report results and cancel campaigns");
  coord->add_option("--lease-ms", co.lease_ms, "job lease, renewed by heartbeats")->capture_default_str();
  coord->add_option("--worker-timeout-ms", co.worker_timeout_ms, "silence after which a worker is forgotten")->capture_default_str();
  coord->add_option("--max-attempts", co.max_attempts, "deliveries before a job ends LOST")->capture_default_str()->check(CLI::Range(1, 100));
  coord
      ->add_option("--max-jobs-per-submit", co.max_jobs_per_submit,
                   "jobs one SUBMIT may plan (a study campaign: studies); more is refused")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
  coord
      ->add_option("--max-jobs-per-campaign", co.max_jobs_per_campaign,
                   "jobs a study campaign may propose over its life")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
  coord
      ->add_option("--client-rate", co.client_requests_per_s,
                   "client requests per second per peer address (bursts of twice this); more are refused")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e6));

  WorkerArgs wo;
  auto* work = app.add_subcommand("worker", "Pull jobs from a coordinator; compile, verify and time them in a sandbox");
  work->add_option("--coordinator", wo.coordinator, "coordinator's worker endpoint")->capture_default_str();
  work->add_option("--key", wo.key_file, "this worker's CURVE secret key file (NAME.key), for a coordinator with keys")
      ->check(CLI::ExistingFile);
  work->add_option("--coordinator-key", wo.coordinator_key_file, "the coordinator's CURVE public key file (NAME.pub)")
      ->check(CLI::ExistingFile);
  work->add_option("--backend", wo.backend, "auto, cpu or cuda")->capture_default_str();
  work->add_option("--gpus", wo.gpus, "'all' or comma-separated CUDA ordinals; one agent per GPU")->capture_default_str();
  work->add_option("--id", wo.id,
                   "worker id, unique in the farm (default: <host>-<backend><device>, e.g. gpu01-cuda0; a second live "
                   "worker on this host takes gpu01-cuda0-2, a restarted one its predecessor's id and unacknowledged "
                   "results); one live process per id and --state-dir");
  work->add_option("--slots", wo.slots,
                   "jobs held at once (one measuring, the rest compiling ahead); 0: one more than the compile threads")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  work->add_option("--compile-threads", wo.compile_threads,
                   "threads compiling held jobs ahead; 0: cuda, half of the host's hardware threads shared between "
                   "its GPUs (at most 8 each); cpu, 1 (compiling disturbs cpu timings)")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  work->add_option("--cache-dir", wo.cache_dir, "compiled artefact cache")->capture_default_str();
  work->add_option("--python", wo.python,
                   "Python with torch (and triton 3.6 for triton jobs); default: $AK_PYTHON, else the build's "
                   "(" AK_DEFAULT_PYTHON ") where it exists, else python3 on PATH");
  work->add_option("--state-dir", wo.state_dir, "outbox of unacknowledged results")->capture_default_str();
  work->add_option("--sandbox", wo.sandbox, "sandbox executable (default: next to autokernel)");
  work->add_option("--heartbeat-ms", wo.heartbeat_ms, "heartbeat interval")->capture_default_str();
  work->add_option("--kb-slots", wo.kb_slots,
                   "KernelBench jobs run at once per GPU; they share the GPU except while one times (kernelbench/HARNESS.md)")
      ->capture_default_str()->check(CLI::Range(1, 64));
  work->add_flag("--kb-fork-server", wo.kb_fork_server,
                 "fork each KernelBench harness step from one process per slot that imported torch, dynamo and "
                 "inductor once, instead of starting Python per step (kernelbench/HARNESS.md, \"Fork server\")");
  work->add_flag("--unconfined", wo.unconfined,
                 "run candidates with this worker's rights (rlimits only) where the machine allows no confinement; "
                 "see worker/sandbox/VERIFICATION.md, \"Confinement\"");
  work->add_flag("--inherit-env", wo.inherit_env,
                 "with --unconfined: hand this worker's whole environment to its sandboxes (a profiler's injection: "
                 "ncu --target-processes all, compute-sanitizer), not only the search paths and GPU selection");
  work->add_flag("--confinement-report", wo.confinement_report,
                 "print which confinement layers this machine allows (one line each), then exit");
  work->add_option("--candidate-memory-mb", wo.candidate_memory_mb,
                   "cgroup memory limit of each sandbox and KernelBench step [MiB]; 0: none")
      ->capture_default_str();
  work->add_option("--metrics", wo.metrics_bind,
                   "host:port for this worker's Prometheus /metrics (a bare port: 127.0.0.1; 0.0.0.0:9465 to serve "
                   "beyond this host); empty to disable")
      ->capture_default_str();
  work->add_option("--candidate-pids", wo.candidate_pids, "cgroup limit on processes of each sandbox and step; 0: none")
      ->capture_default_str();

  ClientArgs cl;
  std::string client_key, coordinator_key;
  auto add_client = [&](CLI::App* sub) {
    sub->add_option("--client", cl.endpoint, "coordinator's client endpoint")->capture_default_str();
    sub->add_option("--timeout-ms", cl.timeout_ms, "reply timeout")->capture_default_str();
    sub->add_option("--key", client_key, "this client's CURVE secret key file (NAME.key), for a coordinator with keys")
        ->envname("AK_CLIENT_KEY");
    sub->add_option("--coordinator-key", coordinator_key, "the coordinator's CURVE public key file (NAME.pub)")
        ->envname("AK_COORDINATOR_KEY");
  };
  std::string campaign_file;
  bool wait = false;
  auto* sub = app.add_subcommand("submit", "Submit a campaign file (.json or .toml)");
  sub->add_option("campaign", campaign_file, "campaign file")->required();
  sub->add_flag("--wait", wait, "follow progress until the campaign finishes");
  bool allow_source_outside = false;
  sub->add_flag("--allow-source-outside", allow_source_outside,
                "let source_file name any file (default: a relative path under the campaign file's folder or the "
                "current folder)");
  add_client(sub);

  std::string cancel_id, cancel_reason;
  auto* can = app.add_subcommand("cancel", "Cancel a campaign: queued jobs end CANCELLED, running KernelBench jobs are stopped");
  can->add_option("campaign", cancel_id, "campaign id (autokernel status lists them)")->required();
  can->add_option("--reason", cancel_reason, "kept with the campaign and in each cancelled job's row");
  add_client(can);

  bool as_json = false;
  auto* stat = app.add_subcommand("status", "Jobs by state, workers, campaigns and throughput");
  stat->add_flag("--json", as_json, "print the raw status document");
  add_client(stat);

  std::string campaign, status_filter;
  ResultsFilter rf;
  int limit = 0;
  auto* res = app.add_subcommand("results", "Result rows, best first per shape and dtype");
  res->add_option("--campaign", campaign, "only this campaign");
  res->add_option("--status", status_filter, "only this status (PASS, FAIL, COMPILE_ERROR, TIMEOUT, CRASH, REJECTED, LOST, CANCELLED)");
  res->add_option("--kernel", rf.kernel_type, "only this target's kernel type (softmax, matmul, ...)");
  res->add_option("--shape", rf.shape, "only this target's shape, e.g. 4096x4096");
  res->add_option("--gpu-model", rf.gpu_model, "only results of workers with this GPU (case-insensitive), 'cpu' for CPU workers");
  res->add_option("--limit", limit, "at most this many rows");
  res->add_flag("--json", as_json, "rows as JSON");
  add_client(res);

  std::string tsv = "results.tsv", json_out = "results.json";
  ak::cli::ExportArgs xa;
  auto* exp = app.add_subcommand("export",
                                 "Write results.tsv (AutoKernel's columns first) and results.json; with --hf, the "
                                 "tuned cuda and triton kernels as a Hugging Face Kernels package instead");
  exp->add_option("--campaign", campaign, "only this campaign");
  exp->add_option("--tsv", tsv, "TSV path")->capture_default_str();
  exp->add_option("--json", json_out, "JSON path; empty for none")->capture_default_str();
  auto* hf = exp->add_option("--hf", xa.hf_dir,
                             "write a Hugging Face Kernels package into this folder (models/export/README.md; "
                             "a package written there before is replaced)");
  exp->add_option("--tuned", xa.tuned, "--hf: `autokernel best --export` output; default: the farm's tuning database")
      ->needs(hf);
  exp->add_option("--gpu-model", xa.gpu_model, "--hf: the kernels of this GPU model; default: the only one there is")
      ->needs(hf);
  exp->add_option("--arch", xa.arch, "--hf: the architecture to compile for (sm_90a); default: the one they ran on")
      ->needs(hf);
  exp->add_option("--name", xa.name, "--hf: the Python package's name")->capture_default_str()->needs(hf);
  exp->add_option("--min-speedup", xa.min_speedup,
                  "--hf: only kernels faster than PyTorch's op (where tuned) by more than this; 0: all")
      ->capture_default_str()
      ->needs(hf);
  exp->add_flag("--unconfined", xa.unconfined,
                "--hf: compile the tuned sources (candidates' code) without confinement, where the machine "
                "lacks its layers (see `autokernel worker --confinement-report`)")
      ->needs(hf);
  exp->add_flag("--build", xa.build, "--hf: build the package's torch extension too (python build.py)")->needs(hf);
  exp->add_option("--python", xa.python, "--hf: Python with torch; default: $AK_PYTHON, else the build's, else python3")
      ->needs(hf);
  add_client(exp);

  BestArgs ba;
  auto* best = app.add_subcommand("best", "The tuning database: best verified configuration per kernel type, backend, GPU model, dtype and shape");
  best->add_option("--kernel", ba.query.kernel_type, "only this kernel type");
  best->add_option("--backend", ba.query.backend, "only this backend (cpu, cuda, triton)");
  best->add_option("--gpu-model", ba.query.gpu_model, "only this GPU model (case-insensitive)");
  best->add_option("--dtype", ba.query.dtype, "only this dtype (fp32, fp16, bf16)");
  best->add_option("--shape", ba.query.shape, "only this shape, e.g. 4096x4096");
  best->add_option("--export", ba.export_path, "write the matching entries to this file (the format kernels/tuned.h loads)");
  best->add_option("--import", ba.import_path, "merge an exported file into this farm's database (per key the faster entry stays)");
  best->add_flag("--json", ba.json, "print the export document");
  add_client(best);

  KbArgs kb;
  auto* kbc = app.add_subcommand("kb", "KernelBench on the farm: baselines per GPU model, candidate sweeps, fast_p");
  kbc->require_subcommand(1);
  auto add_kb = [&](CLI::App* s) {
    s->add_option("--kernelbench", kb.kernelbench,
                  "KernelBench checkout (or a folder holding level1/ ..., or the Hugging Face dataset's Parquet files)")
        ->required();
    s->add_option("--python", kb.python, "Python with pyarrow, to read the Hugging Face dataset's files")
        ->capture_default_str();
    s->add_option("--levels", kb.levels, "levels, e.g. 1-3 or 1,3")->capture_default_str();
    s->add_option("--ids", kb.ids, "problem ids, e.g. 1-20,40");
    s->add_option("--backend", kb.backend, "workers that run it: cuda or cpu")->capture_default_str();
    s->add_option("--gpu-model", kb.gpu_models, "GPU model to run on (repeatable): one job per model");
    s->add_option("--precision", kb.precision, "fp32, fp16 or bf16 (KernelBench's precision)")->capture_default_str();
    s->add_option("--correct-trials", kb.correct_trials, "correctness trials per sample")->capture_default_str();
    s->add_option("--perf-trials", kb.perf_trials, "timed trials")->capture_default_str();
    s->add_option("--job-timeout-ms", kb.timeout_ms, "per job: every harness step together")->capture_default_str();
    s->add_option("--name", kb.name, "campaign name");
    s->add_option("--wait-s", kb.wait_s,
                  "stop following the campaign after this many seconds and write the files of the jobs that "
                  "finished (exit status 1; the rest go on in the farm); 0: until every job is done")
        ->check(CLI::NonNegativeNumber);
    s->add_flag("--cancel-at-stop", kb.cancel_at_stop,
                "when --wait-s or an interrupt ends the wait first, cancel the campaign instead of leaving its "
                "jobs in the farm (queued ones end CANCELLED, running ones are stopped)");
    s->add_option("--out", kb.out, "output folder")->capture_default_str();
    s->add_flag("!--kb-cast-integer-inputs", kb.keep_integer_inputs,
                "cast integer inputs to the precision as KernelBench does (issue #151) instead of keeping them");
    add_client(s);
  };
  auto* kbb = kbc->add_subcommand("baseline", "Eager and torch.compile baselines of every selected problem (results/timing/<hardware>/)");
  add_kb(kbb);
  kbb->add_option("--modes", kb.baselines, "eager, compile, compile-max-autotune ... (repeat the option for each)")
      ->capture_default_str();
  kbb->add_flag("--skip-measured", kb.skip_measured,
                "leave out the problems that the baseline files in --out hold in every mode of --modes for the one "
                "--gpu-model (cpu on cpu workers), so a sweep stopped part-way goes on where it stopped");
  auto* kbs = kbc->add_subcommand("sweep", "Evaluate a folder of generations, one job per sample; fast_p against the farm's baselines");
  add_kb(kbs);
  auto* kb_gen = kbs->add_option("--generations", kb.generations, "folder of level_<L>_problem_<P>_sample_<S>_kernel.py");
  kbs->add_flag("--builtin", kb.builtin,
                "instead of --generations: the kernel library's Triton kernels as candidates for the level-1 problems they "
                "cover, written to <out>/builtin/ (kernelbench/README.md)")
      ->excludes(kb_gen);
  kbs->add_option("--tuning", kb.tuning,
                  "with --builtin: tuning database export (autokernel best --export) to take configurations from; "
                  "needs one --gpu-model");
  kbs->add_option("--baselines", kb.baseline_files,
                  "a KernelBench baseline file (results/timing/<hardware>/baseline_time_torch*.json, repeatable) to "
                  "score against where the farm has measured no baseline of that problem, mode and GPU model")
      ->check(CLI::ExistingFile);
  kbs->add_option("--sample-backend", kb.sample_backend, "the candidates' backend: cuda, triton or torch")->capture_default_str();
  kbs->add_flag("!--no-strict", kb.strict, "skip the strict checks (faithful verdict only)");

  auto* kbsc = kbc->add_subcommand(
      "score", "fast_p of a sweep's eval_results.json files against KernelBench baseline files, offline (no farm)");
  kbsc->add_option("--kernelbench", kb.kernelbench, "KernelBench checkout the sweep ran (problem ids to names)")->required();
  kbsc->add_option("--python", kb.python, "Python with pyarrow, to read the Hugging Face dataset's files")
      ->capture_default_str();
  kbsc->add_option("--eval-results", kb.eval_files,
                   "eval_results.json of one level (repeatable); the level is the last level<N> in its path "
                   "(<out>/level1/eval_results.json, eval_results-builtin-level1.json)")
      ->required()->check(CLI::ExistingFile);
  kbsc->add_option("--baselines", kb.baseline_files,
                   "KernelBench baseline file (baseline_time_torch*.json, repeatable; an earlier file's figure wins)")
      ->required()->check(CLI::ExistingFile);
  kbsc->add_option("--levels", kb.score_levels, "levels to score (default: every level with an eval_results file)");
  kbsc->add_option("--ids", kb.ids, "problem ids, e.g. 1-20,40");
  kbsc->add_option("--gpu-model", kb.gpu_models,
                   "GPU model of entries that name none (no metadata.hardware, no hardware in a baseline file)")
      ->expected(0, 1);
  kbsc->add_option("--json", kb.score_json, "write the scores here (the form of kb sweep's scores.json)");

  std::string key_name, key_dir = ".";
  ak::cli::ProfileArgs pa;
  auto* prof = app.add_subcommand("profile",
                                  "A model's profile on a worker: device time per op, each kernel counted once, "
                                  "classified into kernel types, memory- or compute-bound");
  prof->add_option("--model", pa.model, "a model file (models/README.md), examples/NAME[:CONFIG] or hf:ARCH")
      ->required();
  prof->add_option("--backend", pa.backend, "the workers that run it: cuda or cpu")->capture_default_str();
  prof->add_option("--gpu-model", pa.gpu_model, "only workers of this GPU model (\"NVIDIA H200\")");
  prof->add_option("--dtype", pa.dtype, "fp32, fp16 or bf16: the model's parameters and inputs")->capture_default_str();
  prof->add_flag("--compile", pa.compile, "profile torch.compile(model) instead of eager");
  prof->add_option("--iters", pa.iters, "profiled iterations")->capture_default_str();
  prof->add_option("--warmup", pa.warmup, "iterations before profiling")->capture_default_str();
  prof->add_option("--job-timeout-ms", pa.timeout_ms, "the profile job's timeout")->capture_default_str();
  prof->add_option("--top", pa.top, "rows of the table")->capture_default_str();
  prof->add_option("--wait-s", pa.wait_s, "stop waiting after this long (the job goes on); 0: until it ends")
      ->capture_default_str();
  prof->add_option("--json", pa.json_out, "write the profile documents (a JSON array) here");
  add_client(prof);

  ak::cli::VerifyArgs va;
  auto* ver = app.add_subcommand("verify",
                                 "The tuned kernels plugged into a model on a worker: outputs, greedy decoding, "
                                 "end-to-end time against eager and torch.compile");
  ver->add_option("--model", va.model, "a model file (models/README.md), examples/NAME[:CONFIG] or hf:ARCH")
      ->required();
  ver->add_option("--tuned", va.tuned, "`autokernel best --export` output; default: the farm's tuning database");
  ver->add_option("--profile", va.profile, "`autokernel profile --json` output, for the Amdahl prediction");
  ver->add_option("--backend", va.backend, "the workers that run it: cuda or cpu")->capture_default_str();
  ver->add_option("--gpu-model", va.gpu_model, "only workers of this GPU model (\"NVIDIA H200\")");
  ver->add_option("--dtype", va.dtype, "fp32, fp16 or bf16: the model's parameters and inputs")->capture_default_str();
  ver->add_flag("!--no-compile", va.compile, "do not time torch.compile");
  ver->add_option("--iters", va.iters, "timed rounds (one forward of each variant per round)")->capture_default_str();
  ver->add_option("--warmup", va.warmup, "rounds before")->capture_default_str();
  ver->add_option("--decode-tokens", va.decode_tokens, "greedy decoding check of a language model; 0: none")
      ->capture_default_str();
  ver->add_option("--min-speedup", va.min_speedup,
                  "plug in only kernels faster than PyTorch's op (where tuned) by more than this; 0: all")
      ->capture_default_str();
  ver->add_option("--job-timeout-ms", va.timeout_ms, "the verify job's timeout")->capture_default_str();
  ver->add_option("--wait-s", va.wait_s, "stop waiting after this long (the job goes on); 0: until it ends")
      ->capture_default_str();
  ver->add_option("--json", va.json_out, "write the verify reports (a JSON array) here");
  add_client(ver);

  std::string kernel_type, starter_backend = "cpu";
  auto* kern = app.add_subcommand("kernels", "The kernel types: dtypes, backends, tunables and shapes (offline)");
  kern->add_option("type", kernel_type, "one type's details");
  auto* start = app.add_subcommand("starter",
                                   "Print a kernel type's starter source, self-contained: copy it, edit "
                                   "it, name it as a campaign's source_file (offline)");
  start->add_option("type", kernel_type, "the kernel type")->required();
  start->add_option("--backend", starter_backend, "cpu, cuda or triton")->capture_default_str();
  std::vector<std::string> check_files;
  bool check_outside = false;
  auto* chk = app.add_subcommand("check",
                                 "Check campaign files with the coordinator's own planner, offline: what "
                                 "each would run, or the key at fault");
  chk->add_option("files", check_files, "campaign files (.json or .toml)")->required();
  chk->add_flag("--allow-source-outside", check_outside, "a source_file may lie outside the campaign's folder");

  ak::cli::ExtractArgs ea;
  auto* extr = app.add_subcommand("extract", "A profile's targets (the model's shapes and shares) as a study campaign");
  extr->add_option("--profile", ea.profile, "`autokernel profile --json` output")->required();
  extr->add_option("--backend", ea.backend, "the backend to tune on")->capture_default_str();
  extr->add_option("--gpu-model", ea.gpu_model, "the GPU model to tune on; default: the profile's");
  extr->add_option("--min-share", ea.min_share, "leave out targets with a smaller share of the device time")
      ->capture_default_str();
  extr->add_option("--budget-trials", ea.budget_trials, "trials per study")->capture_default_str();
  extr->add_option("--out", ea.out, "write the study campaign (JSON) here; default: stdout");

  auto* keys = app.add_subcommand("keys", "CURVE key pairs for the coordinator, workers and clients");
  keys->require_subcommand(1);
  auto* keys_gen = keys->add_subcommand("generate", "Write NAME.key (secret, mode 0600) and NAME.pub (public key)");
  keys_gen->add_option("name", key_name, "key name, e.g. coordinator, worker-gpu01, alice")->required();
  keys_gen->add_option("--dir", key_dir, "folder to write them in")->capture_default_str();

  CalibrateArgs ca;
  auto* cal = app.add_subcommand("calibrate", "Measure this device's ceilings (copy bandwidth, GEMM TFLOP/s) beside its datasheet");
  cal->add_option("--backend", ca.backend, "auto, cpu or cuda")->capture_default_str();
  cal->add_option("--device", ca.device, "CUDA ordinal")->capture_default_str();
  cal->add_option("--sandbox", ca.sandbox, "sandbox executable (default: next to autokernel)");
  cal->add_option("--python", ca.python, "Python whose torch the sandbox loads (as autokernel worker --python)");
  cal->add_flag("--json", ca.json, "print the ceilings as JSON");

  CLI11_PARSE(app, argc, argv);
  // Logs go to stderr: stdout carries what a command prints (tables, --json documents, the
  // coordinator's READY line), so `autokernel calibrate --json | jq` and pipes read clean output.
  spdlog::set_default_logger(spdlog::stderr_color_mt("autokernel"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%P] %v");
  // Warnings and errors reach a piped or redirected log at once, not when a buffer fills (or
  // never, when the process is killed).
  spdlog::flush_on(spdlog::level::warn);
  ak::install_stop_signal_handlers();
  // The workers' Python (cli/python_env.h) when --python does not name one.
  if (const char* python = std::getenv("AK_PYTHON")) wo.python_env = ca.python_env = xa.python_env = python;

  if (*keys_gen) return ak::cli::keys_generate(key_name, key_dir);
  if (*kern) return ak::cli::kernels_list(kernel_type);
  if (*start) return ak::cli::starter(kernel_type, starter_backend);
  if (*chk) return ak::cli::check(check_files, check_outside);
  if (int rc = ak::cli::load_client_keys(client_key, coordinator_key, &cl); rc != 0) return rc;
  if (*run) {
    run_args.dtype_given = run_dtype->count() > 0;
    return ak::cli::run(run_args);
  }
  if (*ver) return ak::cli::verify(cl, va);
  if (*coord) return ak::cli::coordinator(co);
  if (*work) return ak::cli::worker(wo);
  if (*sub) return ak::cli::submit(cl, campaign_file, wait, allow_source_outside);
  if (*stat) {
    // A status is answered at once by a coordinator that runs: without --timeout-ms, say within
    // 5 s that none answers rather than after the 30 s other requests may need.
    if (stat->get_option("--timeout-ms")->count() == 0) cl.timeout_ms = 5'000;
    return ak::cli::status(cl, as_json);
  }
  if (*can) return ak::cli::cancel(cl, cancel_id, cancel_reason);
  rf.campaign_id = campaign;
  rf.status = status_filter;
  if (*res) return ak::cli::results(cl, rf, as_json, limit);
  if (*best) return ak::cli::best(cl, ba);
  if (*exp)
    return xa.hf_dir.empty() ? ak::cli::export_results(cl, campaign, tsv, json_out) : ak::cli::export_hf(cl, xa);
  if (*cal) return ak::cli::calibrate(ca);
  if (*kbb) return ak::cli::kb_baseline(cl, kb);
  if (*prof) return ak::cli::profile(cl, pa);
  if (*extr) return ak::cli::extract(ea);
  if (*kbs) return ak::cli::kb_sweep(cl, kb);
  if (*kbsc) {
    kb.levels = kb.score_levels;
    return ak::cli::kb_score(kb);
  }
  return 2;
}
