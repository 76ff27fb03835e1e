#include "worker/kernelbench_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>

#include <spdlog/spdlog.h>

#include "common/file.h"
#include "common/process.h"
#include "common/protocol.h"
#include "kernelbench/bridge.h"
#include "kernelbench/harness_source.h"
#include "kernelbench/witness.h"
#include "worker/python_step.h"

namespace ak {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string short_text(std::string s, size_t n = 400) {
  if (s.size() > n) s = s.substr(0, n) + "...";
  return s;
}

// A string field of a harness document as text: another type as its JSON, absent as "".
std::string text_of(const json& doc, const char* key) {
  if (!doc.is_object()) return std::string();
  auto it = doc.find(key);
  if (it == doc.end()) return std::string();
  return it->is_string() ? it->get<std::string>() : it->dump();
}

}  // namespace

KernelBenchRunner::KernelBenchRunner(KernelBenchRunnerOptions options) : options_(std::move(options)) {
  static std::atomic<int> runners{0};
  index_ = runners.fetch_add(1);
}

std::string KernelBenchRunner::harness_path() {
  if (!harness_path_.empty()) return harness_path_;
  std::error_code ec;
  fs::create_directories(options_.work_dir, ec);
  // What workers killed with SIGKILL left: their harness copies and job folders.
  remove_leftovers_of_dead_processes_once(options_.work_dir, "harness-");
  remove_leftovers_of_dead_processes_once(options_.work_dir, "fork-server-");
  remove_leftovers_of_dead_processes_once((fs::path(options_.work_dir) / "jobs").string(), "");
  // The zipapp, named by the hash of its bytes (harness-<pid>-<xxh64>.pyz), so a copy of another
  // version, of whatever length, is never taken for this one.
  const std::string zipapp(kernelbench::kHarnessZipapp);
  const fs::path p = fs::path(options_.work_dir) /
                     ("harness-" + std::to_string(getpid()) + "-" + kernelbench::xxh64_hex(zipapp) + ".pyz");
  // Agents of one process (one per GPU) share the folder: the atomic write gives each its own
  // temporary copy, renamed over the file, so no harness run ever reads a half-written file.
  if (write_file_atomically(p.string(), zipapp).ok()) harness_path_ = p.string();
  return harness_path_;
}

KernelBenchRunner::Step KernelBenchRunner::run_step(const std::string& dir, const std::string& name, json request,
                                                    std::chrono::steady_clock::time_point deadline,
                                                    const std::vector<std::string>& env,
                                                    const std::vector<std::string>& read_only) {
  Step step;
  const fs::path d(dir);
  request["result_path"] = (d / (name + ".result.json")).string();
  const fs::path req = d / (name + ".request.json");
  const fs::path log = d / (name + ".log");
  if (!write_file_atomically(req.string(), request.dump(1)).ok()) {
    step.exit_code = -1;
    step.log_tail = "cannot write " + req.string();
    return step;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_) {
      stopped_ = true;
      step.exit_code = 128 + SIGKILL;
      step.log_tail = "not started: the job was cancelled";
      return step;
    }
  }
  const bool server =
      options_.fork_server && !options_.confinement.for_child().any() && env.empty() && read_only.empty();
  if (options_.fork_server && !server) {
    static std::once_flag logged;
    std::call_once(logged,
                   [] { spdlog::warn("KernelBench fork server off: confined steps each start a fresh Python"); });
  }
  if (!(server && run_in_server(req, log, deadline, step))) spawn_step(req, log, deadline, step, env, read_only);
  step.log_tail = read_tail(log.string(), 2000);
  std::ifstream in(request["result_path"].get<std::string>());
  if (in) {
    json r = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!r.is_discarded() && r.is_object()) step.result = std::move(r);
  }
  return step;
}

std::vector<std::string> KernelBenchRunner::step_env() const {
  std::vector<std::string> env = {"PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1"};
  if (options_.inductor_threads > 0)
    env.push_back("TORCHINDUCTOR_COMPILE_THREADS=" + std::to_string(options_.inductor_threads));
  return env;
}

void KernelBenchRunner::spawn_step(const fs::path& req, const fs::path& log,
                                   std::chrono::steady_clock::time_point deadline, Step& step,
                                   const std::vector<std::string>& env, const std::vector<std::string>& read_only) {
  PythonStep ps;
  ps.python = options_.python;
  // -s: no user site-packages. HOME is the job's folder, which an earlier step of the job could
  // fill with a usercustomize or a .pth file that would run before the harness.
  ps.args = {"-s", harness_path(), req.string()};
  ps.dir = req.parent_path();
  ps.log = log;
  ps.read_only = {harness_path()};
  ps.read_only.insert(ps.read_only.end(), read_only.begin(), read_only.end());
  if (!options_.gpu_lock_path.empty()) ps.shared = {options_.gpu_lock_path, options_.gpu_lock_path + ".gate"};
  ps.env = step_env();
  ps.env.insert(ps.env.end(), env.begin(), env.end());
  if (options_.confinement.for_child().any())
    ps.env.push_back("TRITON_CACHE_DIR=" + (ps.dir / "build" / "triton").string());
  ps.cgroup_name =
      "kernelbench-" + std::to_string(getpid()) + "-" + std::to_string(index_) + "-" + ps.dir.filename().string();
  const PythonStepOutcome out = run_python_step(
      ps, options_.confinement, deadline,
      [&](pid_t group) {
        std::lock_guard<std::mutex> lock(mu_);
        step_group_ = group;
        if (cancelled_) stopped_ = true;  // cancelled between the check and the spawn
        return !cancelled_;
      },
      [&] {
        std::lock_guard<std::mutex> lock(mu_);
        step_group_ = -1;
      });
  step.timed_out = out.timed_out;
  step.exit_code = out.exit_code;
}

bool KernelBenchRunner::ensure_server(std::chrono::steady_clock::time_point deadline) {
  if (server_refused_) return false;
  if (server_ && server_->running()) return true;
  server_.reset();
  ChildProcess::Options o;
  o.capture_stdout = true;
  o.pipe_stdin = true;
  o.env = step_env();
  // Its stderr (a refusal's traceback, the imports' warnings) beside the job folders, one file per
  // runner: fork-server-<pid>-<runner>.log, swept with the harness copies when the pid is gone.
  o.output_path = (fs::path(options_.work_dir) /
                   ("fork-server-" + std::to_string(getpid()) + "-" + std::to_string(index_) + ".log"))
                      .string();
  auto child = ChildProcess::spawn({options_.python, "-s", harness_path(), "--serve"}, o);
  std::string why;
  if (child.ok()) {
    // Importing torch, dynamo and inductor: up to 180 s on a cold, busy host, within the job's time.
    const auto until = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(180));
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      auto line = child->read_line(std::max(left, std::chrono::milliseconds(0)));
      if (!line.ok()) {
        why = line.status().message();
        break;
      }
      if (!line->has_value()) {
        why = "no 'ready' in time";
        break;
      }
      if (**line == "ready") {
        server_ = std::make_unique<ChildProcess>(std::move(*child));
        server_failures_ = 0;
        return true;
      }
      if ((*line)->rfind("refused ", 0) == 0) {  // for good: CUDA's driver is loaded in it
        spdlog::warn("KernelBench fork server {}; each step starts a fresh Python", **line);
        server_refused_ = true;
        return false;
      }
      // Anything else an import printed: not the server's answer.
    }
  } else {
    why = child.status().message();
  }
  // Not started this time: this step runs as a fresh process, a later one tries again, up to three
  // failures in a row.
  server_refused_ = ++server_failures_ >= 3;
  spdlog::warn("KernelBench fork server did not start ({} of 3 tries{}): {}", server_failures_,
               server_refused_ ? ", each step now starts a fresh Python" : "", why);
  return false;
}

namespace {

// The pid in "started <pid>", or nullopt for anything that is not a plausible child's pid.
std::optional<pid_t> parse_pid(const std::string& text) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v <= 1 || v > INT32_MAX) return std::nullopt;
  return static_cast<pid_t>(v);
}

}  // namespace

bool KernelBenchRunner::run_in_server(const fs::path& req, const fs::path& log,
                                      std::chrono::steady_clock::time_point deadline, Step& step) {
  if (!ensure_server(deadline)) return false;
  if (!server_->write_line(json{{"request", req.string()}, {"log", log.string()}}.dump()).ok()) {
    server_.reset();  // gone: the next step starts another
    return false;
  }
  std::optional<pid_t> started;
  {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!started) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      auto line = server_->read_line(std::max(left, std::chrono::milliseconds(0)));
      if (!line.ok() || !line->has_value() || (*line)->rfind("bad order", 0) == 0) break;
      if ((*line)->rfind("started ", 0) == 0) {
        started = parse_pid((*line)->substr(8));
        if (!started) break;
      }
    }
  }
  if (!started) {
    // Killing the server takes a child it may have started with it (PR_SET_PDEATHSIG); the step
    // then runs as a fresh process.
    server_.reset();
    return false;
  }
  const pid_t pid = *started;
  {
    std::lock_guard<std::mutex> lock(mu_);
    step_group_ = pid;  // the server made it a group leader before announcing it
    if (cancelled_) {   // cancelled between the check and the start
      kill_process_group(step_group_);
      stopped_ = true;
    }
  }
  const std::string exited = "exited " + std::to_string(pid) + " ";
  auto line = server_->wait_for_line(
      exited, std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()),
                       std::chrono::milliseconds(0)));
  if (!line.ok() && line.status().code() == StatusCode::kTimedOut) {
    // Past the deadline: the step's group goes; the server reaps it and reports it.
    step.timed_out = true;
    kill_process_group(pid);
    line = server_->wait_for_line(exited, std::chrono::seconds(30));
  }
  const bool lost = !line.ok();
  kill_process_group(pid);  // what the step started (compilers, candidate threads' processes) goes with it
  {
    std::lock_guard<std::mutex> lock(mu_);
    step_group_ = -1;
  }
  if (lost) {
    server_.reset();  // killed with its children (PR_SET_PDEATHSIG); the next step starts another
    step.exit_code = -1;
    if (!step.timed_out) std::ofstream(log, std::ios::app) << "\nthe fork server was lost during the step\n";
    return true;
  }
  step.exit_code = std::atoi(line->c_str());
  return true;
}

void KernelBenchRunner::claim(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  claimed_ = job_id;
  cancelled_ = stopped_ = false;
}

bool KernelBenchRunner::cancel(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (claimed_.empty() || claimed_ != job_id) return false;
  cancelled_ = true;
  if (step_group_ > 0) {
    kill_process_group(step_group_);
    stopped_ = true;
  }
  return true;
}

KernelBenchOutcome KernelBenchRunner::run(const JobSpec& job, std::chrono::milliseconds timeout) {
  bool before_start = false;  // cancelled between claim() and here
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (claimed_ != job.job_id) {
      claimed_ = job.job_id;
      cancelled_ = stopped_ = false;
    }
    before_start = stopped_ = cancelled_;
  }
  KernelBenchOutcome out = before_start ? KernelBenchOutcome{} : run_job(job, timeout);
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) {
    // A step was killed or never started: whatever it looked like (a crash, a timeout), the cause
    // was the cancel. A job whose steps all ran keeps its result, cancelled or not.
    out.status = ResultStatus::kCancelled;
    out.reason = "its campaign was cancelled; " + (out.stage.empty() ? std::string("stopped before its first step")
                                                                      : "stopped in its " + out.stage + " step");
    if (out.stage.empty()) out.stage = "kernelbench";
    out.m = Measurement{};
  }
  claimed_.clear();
  cancelled_ = stopped_ = false;
  return out;
}

KernelBenchOutcome KernelBenchRunner::run_job(const JobSpec& job, std::chrono::milliseconds timeout) {
  KernelBenchOutcome out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (!job.kernelbench) {
    out.status = ResultStatus::kCrash;
    out.stage = "kernelbench";
    out.reason = "not a KernelBench job (no 'kernelbench' task)";
    return out;
  }
  const KernelBenchTask& t = *job.kernelbench;
  static std::atomic<uint64_t> seq{0};
  // <pid>-<seq>-<job>: a later runner removes the folders of a worker killed with SIGKILL.
  const fs::path dir = fs::path(options_.work_dir) / "jobs" /
                       (std::to_string(getpid()) + "-" + std::to_string(seq.fetch_add(1)) + "-" + job.job_id);
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir / "build", ec);
  if (ec || harness_path().empty()) {
    out.status = ResultStatus::kCrash;
    out.stage = "kernelbench";
    out.reason = "cannot prepare " + dir.string() + ": " + ec.message();
    return out;
  }
  // The job's private folder: what the worker keeps from the job's steps (the problem and candidate
  // as submitted, the reference outputs), bound read-only into the steps that read them, never
  // writable by any step. The job's folder itself is writable by every step.
  const fs::path private_dir = fs::path(dir.string() + ".private");
  fs::remove_all(private_dir, ec);
  fs::create_directories(private_dir, ec);
  const fs::path problem = dir / t.problem_name;
  (void)write_file_atomically(problem.string(), t.problem_code);
  json base = {{"problem_path", problem.string()},
               {"backend", t.backend},
               {"device", options_.device},
               {"precision", t.precision},
               {"seed", t.seed},
               {"num_correct_trials", t.num_correct_trials},
               {"num_perf_trials", t.num_perf_trials},
               {"switches", t.switches},
               {"strict", t.strict},
               {"build_dir", (dir / "build").string()}};
  if (!options_.gpu_lock_path.empty()) base["gpu_lock"] = options_.gpu_lock_path;
  auto finish = [&](KernelBenchOutcome o) {
    if (!options_.keep_job_dirs) {
      fs::remove_all(dir, ec);
      fs::remove_all(private_dir, ec);
    }
    return o;
  };
  auto failed_step = [&](const Step& s, const std::string& what) {
    KernelBenchOutcome o;
    o.stage = what;
    if (s.timed_out) {
      o.status = ResultStatus::kTimeout;
      o.reason = "the " + what + " step did not finish within the job's " + std::to_string(timeout.count()) +
                 " ms; its process group was killed";
    } else {
      o.status = ResultStatus::kCrash;
      o.reason = "the " + what + " step ended with exit code " + std::to_string(s.exit_code) +
                 " without a verdict: " + short_text(s.log_tail);
    }
    o.kernelbench = {{"mode", t.mode}, {"step", what}};
    return o;
  };

  if (t.mode == "baseline") {
    json req = base;
    req["mode"] = "baseline";
    req["compile"] = t.compile;
    req["compile_mode"] = t.compile_mode;
    Step s = run_step(dir.string(), "baseline", req, deadline);
    if (s.result.is_null()) return finish(failed_step(s, "baseline"));
    out.kernelbench = {{"mode", "baseline"}, {"baseline", s.result}};
    auto decoded = protocol::parse_kernelbench_verdict(out.kernelbench);
    if (!decoded.ok() || !decoded.value().baseline) {
      out.status = ResultStatus::kCrash;
      out.stage = "baseline";
      out.reason = "the harness's baseline does not decode: " +
                   short_text(decoded.ok() ? std::string("no baseline") : decoded.status().message());
      out.kernelbench = json{{"mode", "baseline"}, {"step", "baseline"}};
      return finish(out);
    }
    const protocol::KernelBenchBaseline& b = *decoded.value().baseline;
    if (!b.ok.value_or(false)) {
      out.status = ResultStatus::kFail;
      out.stage = "baseline";
      out.reason = short_text(b.error.value_or("the baseline did not run"));
      return finish(out);
    }
    out.status = ResultStatus::kPass;
    out.stage = "baseline";
    out.m.latency_us = b.mean_ms.value_or(0.0) * 1000.0;
    out.m.baseline_us = out.m.latency_us;
    out.m.speedup = 1.0;
    if (b.stats && b.stats->is_object()) {
      auto n = b.stats->find("num_trials");
      if (n != b.stats->end() && n->is_number_integer()) out.m.samples = n->get<int>();
    }
    return finish(out);
  }

  // Candidate mode: reference, candidate, judge.
  const fs::path ref_out = dir / "reference.pt", cand_out = dir / "candidate.pt";
  const fs::path private_ref = private_dir / "reference.pt";
  json ref_req = base;
  ref_req["mode"] = "reference";
  ref_req["reference_outputs"] = ref_out.string();
  Step ref{};
  if (t.strict) {
    ref = run_step(dir.string(), "reference", ref_req, deadline);
    const auto ok = ref.result.is_object() ? ref.result.find("ok") : ref.result.end();
    if (ref.result.is_null() || ok == ref.result.end() || *ok != json(true)) {
      if (ref.result.is_null()) return finish(failed_step(ref, "reference"));
      out.status = ResultStatus::kCrash;
      out.stage = "reference";
      out.reason = "the problem's reference did not run: " + short_text(text_of(ref.result, "error"));
      out.kernelbench = {{"mode", "candidate"}, {"reference", ref.result}};
      return finish(out);
    }
    // Out of the candidate step's reach: it could otherwise rewrite what the judge compares with.
    fs::rename(ref_out, private_ref, ec);
    if (ec) {
      out.status = ResultStatus::kCrash;
      out.stage = "reference";
      out.reason = "cannot keep the reference outputs: " + ec.message();
      return finish(out);
    }
  }
  const fs::path cand = dir / ("candidate_sample_" + std::to_string(t.sample_id) + ".py");
  (void)write_file_atomically(cand.string(), job.source);
  json cand_req = base;
  cand_req["mode"] = "candidate";
  cand_req["candidate_path"] = cand.string();
  cand_req["candidate_outputs"] = cand_out.string();
  Step c = run_step(dir.string(), "candidate", cand_req, deadline);
  if (c.result.is_null()) return finish(failed_step(c, "candidate"));
  json kb = c.result;
  kb["mode"] = "candidate";
  if (t.strict && fs::exists(cand_out, ec)) {
    json judge_req = base;
    judge_req["mode"] = "judge";
    judge_req["reference_outputs"] = private_ref.string();
    judge_req["candidate_outputs"] = cand_out.string();
    Step j = run_step(dir.string(), "judge", judge_req, deadline, {}, {private_ref.string()});
    if (!j.result.is_null())
      kb["judge"] = j.result;
    else if (j.timed_out)
      kb["judge"] = {{"error", "the judge did not finish before the job's deadline (" + std::to_string(timeout.count()) +
                                   " ms for every step together)"}};
    else
      kb["judge"] = {{"error", "the judge gave no verdict (exit code " + std::to_string(j.exit_code) +
                                   "): " + short_text(j.log_tail)}};
  }
  // The candidate step's document, decoded once; a field of the wrong type is the harness's
  // failure (or a candidate's forgery), never a verdict.
  auto decoded = protocol::parse_kernelbench_verdict(kb);
  if (!decoded.ok()) {
    out.status = ResultStatus::kCrash;
    out.stage = "candidate";
    out.reason = "the harness's verdict does not decode: " + short_text(decoded.status().message());
    out.kernelbench = json{{"mode", "candidate"}, {"step", "candidate"}};
    return finish(out);
  }
  const protocol::KernelBenchVerdict& v = decoded.value();
  const std::string verdict = v.verdict.value_or("");
  const json meta = v.metadata && v.metadata->is_object() ? *v.metadata : json::object();
  // KernelBench's metadata holds what its eval caught; a value of another type reads as empty.
  const auto text = [&meta](const char* key, const std::string& otherwise = std::string()) {
    auto it = meta.find(key);
    if (it == meta.end()) return otherwise;
    return it->is_string() ? it->get<std::string>() : it->dump();
  };
  if (verdict == "correct") {
    out.status = ResultStatus::kPass;
    out.stage = "measure";
  } else if (verdict == "compile_failure") {
    out.status = ResultStatus::kCompileError;
    out.stage = "compile";
    out.reason = short_text(text("compilation_error_name") + ": " + text("compilation_error"));
  } else if (verdict == "runtime_error") {
    out.status = ResultStatus::kFail;
    out.stage = "runtime";
    out.reason = short_text(text("runtime_error_name") + ": " + text("runtime_error"));
  } else if (verdict == "incorrect") {
    out.status = ResultStatus::kFail;
    out.stage = "correctness";
    out.reason = short_text(text("correctness_issue", "output mismatch") + " " + text("correctness_trials"));
  } else {
    out.status = ResultStatus::kCrash;
    out.stage = "candidate";
    out.reason = "the harness wrote no verdict: " + short_text(kb.dump());
  }
  const double runtime_ms = v.runtime_ms.value_or(-1.0), ref_ms = v.ref_runtime_ms.value_or(-1.0);
  if (runtime_ms > 0) {
    out.m.latency_us = runtime_ms * 1000.0;
    if (v.runtime_stats && v.runtime_stats->is_object()) {
      auto n = v.runtime_stats->find("num_trials");
      if (n != v.runtime_stats->end() && n->is_number_integer()) out.m.samples = n->get<int>();
    }
    if (ref_ms > 0) {
      out.m.baseline_us = ref_ms * 1000.0;
      out.m.speedup = ref_ms / runtime_ms;
    }
  }
  if (t.strict && out.status == ResultStatus::kPass)
    witness(dir, private_dir, job, base, deadline, runtime_ms, out, kb);
  out.kernelbench = std::move(kb);
  return finish(out);
}

// The witness step (HARNESS.md, "witness"): the candidate timed and checked from outside its
// process, on inputs it has not seen. A passed candidate stays passed only when the witness's
// signed result agrees; its speedup then divides the witness's reference time (the candidate's
// process reported the other one) by its own time or the witness's estimate of it, whichever is
// longer.
void KernelBenchRunner::witness(const fs::path& dir, const fs::path& private_dir, const JobSpec& job, const json& base,
                                std::chrono::steady_clock::time_point deadline, double runtime_ms,
                                KernelBenchOutcome& out, json& kb) {
  using kernelbench::WitnessJudgement;
  auto fail = [&](ResultStatus status, const std::string& why, json doc = json::object()) {
    out.status = status;
    out.stage = "witness";
    out.reason = short_text(why);
    doc["verdict"] = "fail";
    doc["reason"] = why;
    kb["witness"] = std::move(doc);
  };
  auto key = kernelbench::new_witness_key();
  if (!key.ok()) return fail(ResultStatus::kCrash, key.status().message());
  // The problem and the candidate as submitted, from the worker's memory: the files of the job's
  // folder are the earlier steps' to rewrite.
  const KernelBenchTask& t = *job.kernelbench;
  const fs::path problem = private_dir / t.problem_name, candidate = private_dir / "candidate.py";
  if (Status s = write_file_atomically(problem.string(), t.problem_code); !s.ok())
    return fail(ResultStatus::kCrash, s.message());
  if (Status s = write_file_atomically(candidate.string(), job.source); !s.ok())
    return fail(ResultStatus::kCrash, s.message());
  json req = base;
  req["mode"] = "witness";
  req["problem_path"] = problem.string();
  req["candidate_path"] = candidate.string();
  // A figure the timing rule alone calls forged is witnessed once more, with a fresh key and fresh
  // secret inputs: a forger is as slow the second time, while a load on the host that fell on the
  // first attempt's candidate rounds alone (seen on a 2-core machine running tests side by side)
  // seldom falls the same way twice. Only a pass at the second look overturns the first: any other
  // end of it (a timeout, a crash, a forged signature, nothing witnessed, a failed reference; the
  // candidate's code ran in the first and may have prepared any of them) leaves the job failed
  // with the first attempt's reason and document, the second's outcome beside it.
  json first_doc;
  std::string first_reason;
  auto second_failed = [&](const std::string& why) {
    first_doc["attempts"] = 2;
    first_doc["second_attempt"] = {{"reason", why}};
    return fail(ResultStatus::kFail, first_reason, std::move(first_doc));
  };
  WitnessJudgement j;
  json doc;
  for (int attempt = 1;; ++attempt) {
    const bool second = attempt == 2;
    Step w = run_step(dir.string(), "witness", req, deadline, {std::string(kernelbench::kWitnessKeyEnv) + "=" + *key},
                      {problem.string(), candidate.string()});
    if (w.result.is_null()) {
      const std::string why = w.timed_out ? "the witness step did not finish before the job's deadline"
                                          : "the witness step ended with exit code " + std::to_string(w.exit_code) +
                                                " without a result: " + short_text(w.log_tail);
      if (second) return second_failed(why);
      if (w.timed_out) return fail(ResultStatus::kTimeout, why);
      // The witness's own failure, or a candidate that killed it: never a pass.
      return fail(ResultStatus::kCrash, why);
    }
    auto body = kernelbench::authentic_witness(w.result, *key);
    if (!body.ok())
      return second ? second_failed(body.status().message()) : fail(ResultStatus::kFail, body.status().message());
    doc = *body;
    j = kernelbench::judge_witness(doc, runtime_ms);
    if (second) {
      if (j.kind != WitnessJudgement::Kind::kPass) return second_failed(j.reason);
      doc["attempts"] = 2;
      doc["first_attempt"] = {{"reason", first_reason}};
      break;
    }
    doc["attempts"] = 1;
    if (!(j.kind == WitnessJudgement::Kind::kFail && j.by_timing)) break;
    first_reason = j.reason;
    first_doc = std::move(doc);  // replaced by the second attempt's before it is read again
    key = kernelbench::new_witness_key();
    if (!key.ok()) return fail(ResultStatus::kCrash, key.status().message());
  }
  if (j.kind == WitnessJudgement::Kind::kFail) return fail(ResultStatus::kFail, j.reason, std::move(doc));
  if (j.kind == WitnessJudgement::Kind::kReferenceFailed) return fail(ResultStatus::kCrash, j.reason, std::move(doc));
  if (j.kind == WitnessJudgement::Kind::kNotWitnessed) {
    doc["verdict"] = "not_witnessed";
    doc["reason"] = j.reason;
  } else {
    doc["verdict"] = "pass";
    doc["counted_ms"] = j.counted_ms;
    doc["slack_ms"] = j.slack_ms;
    out.m.latency_us = j.counted_ms * 1000.0;
    if (j.ref_ms > 0) {
      out.m.baseline_us = j.ref_ms * 1000.0;
      out.m.speedup = j.ref_ms / j.counted_ms;
    }
  }
  kb["witness"] = std::move(doc);
}

}  // namespace ak
