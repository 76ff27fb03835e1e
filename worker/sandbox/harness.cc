// The only libtorch translation unit of the sandbox besides the kernel types' reference.cc.
//
// One request runs: load -> verify.smoke -> verify.sweep -> verify.hostile -> verify.determinism
// -> verify.edge -> measure -> audit. A candidate that fails a stage is never timed. What each
// stage checks and which cheat each defence catches is in worker/sandbox/VERIFICATION.md ("The
// oracle", "Cheat defences" and "Measurement"); tests/hostile/ holds a candidate for each.
#include "worker/sandbox/harness.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#ifndef AK_NO_CUDA  // a build without the CUDA toolkit (worker/cuda_types.h) has no CudaHarness
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif
#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <torch/headeronly/version.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <vector>

#include "common/hash.h"
#include "kernels/reference.h"
#include "kernels/registry.h"
#include "worker/cuda_driver.h"
#include "worker/datasheet.h"
#include "worker/device.h"
#include "worker/measure.h"
#include "worker/nvml.h"
#include "worker/sandbox/candidate.h"
#include "worker/sandbox/tolerance.h"

namespace ak::sandbox {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// The output tensor of one call, inside a larger byte buffer with guard bands on both sides
// filled with a pattern: a candidate that writes outside its output changes them.
class GuardedOutput {
 public:
  static constexpr int64_t kGuardBytes = 64 * 1024;
  static constexpr int kPattern = 0xA5;

  explicit GuardedOutput(const at::Tensor& like) {
    nbytes_ = int64_t(like.nbytes());
    const int64_t body = (nbytes_ + 15) / 16 * 16;
    buf_ = at::empty({kGuardBytes + body + kGuardBytes}, like.options().dtype(at::kByte));
    buf_.fill_(kPattern);
    out_ = buf_.narrow(0, kGuardBytes, nbytes_).view(like.scalar_type()).view(like.sizes());
  }
  at::Tensor& tensor() { return out_; }
  // NaN in every element: an element the candidate does not write fails the comparison.
  void poison() { out_.fill_(std::numeric_limits<double>::quiet_NaN()); }
  void check_guards(const std::string& stage) const {
    at::Tensor head = buf_.narrow(0, 0, kGuardBytes);
    at::Tensor tail = buf_.narrow(0, kGuardBytes + nbytes_, buf_.size(0) - kGuardBytes - nbytes_);
    const int64_t bad_head = (head != kPattern).sum().item<int64_t>();
    const int64_t bad_tail = (tail != kPattern).sum().item<int64_t>();
    if (bad_head == 0 && bad_tail == 0) return;
    std::ostringstream ss;
    ss << "the candidate wrote outside its output buffer: ";
    if (bad_tail) {
      const int64_t first = (tail != kPattern).nonzero().min().item<int64_t>();
      ss << bad_tail << " byte(s) changed in the " << tail.size(0) << " bytes after its end (first at byte +"
         << first << ")";
    }
    if (bad_head) {
      const int64_t last = (head != kPattern).nonzero().max().item<int64_t>();
      ss << (bad_tail ? "; " : "") << bad_head << " byte(s) changed in the " << kGuardBytes
         << " bytes before its start (nearest at byte -" << (kGuardBytes - last) << ")";
    }
    fail(stage, ss.str(), ResultStatus::kRejected);
  }

 private:
  at::Tensor buf_;
  at::Tensor out_;
  int64_t nbytes_ = 0;
};

// Verdicts of the verification stages, for Measurement::verification.
class StageLog {
 public:
  void begin(const std::string& name) {
    entries_.push_back({name, "RUNNING", 0, 0.0, ""});
  }
  void check(double err) {
    entries_.back().checks++;
    entries_.back().worst = std::max(entries_.back().worst, err);
  }
  void note(const std::string& n) { entries_.back().note = n; }
  void pass() { entries_.back().verdict = "PASS"; }
  double worst() const {
    double w = 0;
    for (const auto& e : entries_) w = std::max(w, e.worst);
    return w;
  }
  void end_failed(ResultStatus s) {
    if (!entries_.empty() && entries_.back().verdict == "RUNNING") entries_.back().verdict = result_status_name(s);
  }
  std::string summary() const {
    std::string s;
    for (const auto& e : entries_) {
      if (!s.empty()) s += "; ";
      s += e.name + " " + e.verdict + " " + std::to_string(e.checks);
      if (e.worst > 0) s += " " + fmt(e.worst);
      if (!e.note.empty()) s += " (" + e.note + ")";
    }
    return s;
  }

 private:
  struct Entry {
    std::string name;
    std::string verdict;
    int checks;
    double worst;
    std::string note;
  };
  std::vector<Entry> entries_;
};

// ---- the harness, shared by both backends ----

class HarnessBase : public Harness {
 public:
  void set_progress(std::function<void(const std::string&)> progress) override { progress_ = std::move(progress); }

  SandboxReply run(const SandboxRequest& request) override {
    SandboxReply reply;
    std::string stage = "load";
    StageLog log;
    try {
      reply = run_checked(request, stage, log);
    } catch (const StageError& e) {
      reply.status = e.status;
      reply.stage = e.stage.empty() ? stage : e.stage;
      reply.reason = e.reason;
    } catch (const c10::OutOfMemoryError& e) {
      reply.status = ResultStatus::kFail;
      reply.stage = stage;
      reply.reason = std::string("out of device memory: ") + e.what_without_backtrace();
    } catch (const c10::Error& e) {
      reply.status = ResultStatus::kFail;
      reply.stage = stage;
      reply.reason = std::string("libtorch error: ") + e.what_without_backtrace();
    } catch (const std::exception& e) {
      reply.status = ResultStatus::kFail;
      reply.stage = stage;
      reply.reason = std::string("error: ") + e.what();
    } catch (...) {
      reply.status = ResultStatus::kFail;
      reply.stage = stage;
      reply.reason = "unknown exception";
    }
    if (reply.status != ResultStatus::kPass) {
      // A failure that left the device unusable (sticky CUDA error) ends this sandbox.
      std::string why = device_broken();
      if (!why.empty()) {
        reply.status = ResultStatus::kCrash;
        reply.reason += (reply.reason.empty() ? "" : "; ") + why;
      }
      log.end_failed(reply.status);
      reply.m = Measurement{};
      reply.m.compile_ms = request.compile_ms;
      reply.m.verification = log.summary();
    }
    return reply;
  }

 protected:
  virtual c10::Device device() const = 0;
  virtual std::unique_ptr<Candidate> load(const SandboxRequest& request, const kernels::KernelSpec& spec) = 0;
  // Times one call of `fn` [us]. `prepare` (may be empty) runs first, outside the timed region;
  // with `cold` the device's last-level cache is flushed after it, also outside.
  virtual double time_call(const std::function<void()>& prepare, const std::function<void()>& fn, bool cold) = 0;
  virtual void synchronize(const std::string& stage) = 0;  // throws StageError (CRASH) on a device fault
  virtual bool can_flush() const { return false; }  // false: the backend times hot (CPU)
  virtual bool blocking() const { return false; }   // launches are held by a blocking kernel
  // Allocator figures of the sandbox's device [bytes]; 0 where there is no device allocator.
  virtual void reset_peak_memory() {}
  virtual double allocated_bytes() { return 0; }
  virtual double peak_allocated_bytes() { return 0; }
  // Memory the timed phase may spend on rotated input sets [bytes].
  virtual double rotation_budget_bytes() = 0;
  virtual Telemetry telemetry() { return {}; }
  // Non-empty when the device can no longer be used (the reason).
  virtual std::string device_broken() { return ""; }

  Ceilings ceilings_;
  std::function<void(const std::string&)> progress_;

 private:
  // Every stage change is announced on the protocol channel before the stage runs, so that a
  // sandbox killed or dead mid-job is reported with the stage it was in.
  void enter(std::string& stage, const char* next) {
    stage = next;
    if (progress_) progress_(stage);
  }

  struct Job {
    const JobSpec* spec;
    const kernels::KernelSpec* kernel;
    const kernels::TorchHarness* th;
    kernels::Tolerance tol;
    Candidate* cand;
  };

  SandboxReply run_checked(const SandboxRequest& request, std::string& stage, StageLog& log) {
    const JobSpec& spec = request.job;
    const kernels::KernelSpec* kernel = kernels::find(spec.kernel_type);
    if (!kernel) fail("load", "unknown kernel type '" + spec.kernel_type + "'");
    const kernels::TorchHarness* th = kernels::find_harness(spec.kernel_type);
    if (!th) fail("load", "kernel type '" + spec.kernel_type + "' has no libtorch harness in this sandbox");
    if (std::string bad = kernel->check_shape(spec.shape); !bad.empty()) fail("load", bad);
    auto tol_it = kernel->tolerance.find(spec.dtype);
    if (tol_it == kernel->tolerance.end())
      fail("load", spec.kernel_type + " does not support dtype " + dtype_name(spec.dtype));
    auto src_it = kernel->backends.find(spec.requires_.backend);
    if (src_it == kernel->backends.end())
      fail("load", spec.kernel_type + " has no " + backend_name(spec.requires_.backend) + " backend");

    enter(stage, "load");
    std::unique_ptr<Candidate> cand = load(request, *kernel);
    Job job{&spec, kernel, th, tol_it->second, cand.get()};
    const uint64_t seed = xxh64(spec.job_id, 0x5eed);
    const c10::Device dev = device();

    // 1. smoke test at the job's shape; also measures what the candidate allocates itself.
    enter(stage, "verify.smoke");
    log.begin("smoke");
    std::vector<at::Tensor> inputs = th->make_inputs(spec.shape, spec.dtype, dev, seed);
    double candidate_extra_bytes = 0;
    log.check(check_call(job, stage, "", spec.shape, inputs, th->reference(inputs), &candidate_extra_bytes));
    log.pass();

    // 2. every declared size of the backend, in the job's dtype.
    enter(stage, "verify.sweep");
    log.begin("sweep");
    int skipped = 0;
    uint64_t k = 1;
    for (const auto& shape : src_it->second.default_shapes) {
      if (shape == spec.shape) continue;
      std::vector<at::Tensor> in;
      at::Tensor ref;
      try {
        in = th->make_inputs(shape, spec.dtype, dev, seed + k++);
        ref = th->reference(in);
      } catch (const c10::OutOfMemoryError&) {
        // The reference itself does not fit: not the candidate's failure.
        ++skipped;
        in.clear();
        ref = at::Tensor();
        reset_peak_memory();
        continue;
      }
      log.check(check_call(job, stage, "at " + shape_string(shape), shape, in, ref, nullptr));
    }
    if (skipped) log.note(std::to_string(skipped) + " size(s) skipped: the reference ran out of memory");
    log.pass();

    // 3. hostile inputs at the job's shape.
    enter(stage, "verify.hostile");
    log.begin("hostile");
    for (auto& c : th->hostile_inputs(spec.shape, spec.dtype, dev, seed ^ 0x4057)) {
      at::Tensor ref = th->reference(c.inputs);
      log.check(check_call(job, stage, "on hostile inputs '" + c.name + "'", spec.shape, c.inputs, ref, nullptr));
    }
    log.pass();

    // 4. bitwise determinism over 3 runs on fresh, identical inputs.
    enter(stage, "verify.determinism");
    log.begin("determinism");
    check_determinism(job, stage, seed ^ 0xde7);
    for (int run = 0; run < 3; ++run) log.check(0);  // three runs, compared bitwise
    log.pass();

    // 5. edge sizes.
    enter(stage, "verify.edge");
    log.begin("edge");
    for (const auto& shape : kernel->edge_shapes) {
      std::vector<at::Tensor> in = th->make_inputs(shape, spec.dtype, dev, seed + 1000 + k++);
      log.check(check_call(job, stage, "at edge size " + shape_string(shape), shape, in, th->reference(in), nullptr));
    }
    log.pass();

    enter(stage, "measure");
    SandboxReply reply = measure(job, std::move(inputs), seed, stage, request.compile_ms);
    reply.m.verification = log.summary();
    reply.m.max_abs_error = log.worst();
    reply.m.peak_vram_mb = candidate_vram_mb(job, candidate_extra_bytes);
    return reply;
  }

  // One verified call: guard bands, poisoned output, input mutation check, comparison with `ref`.
  // Returns max |out - ref|; throws StageError (FAIL, REJECTED, CRASH). With `extra_bytes`, also
  // measures the device memory the call allocated beyond the harness's.
  double check_call(const Job& job, const std::string& stage, const std::string& label,
                    const std::vector<int64_t>& shape, const std::vector<at::Tensor>& inputs, const at::Tensor& ref,
                    double* extra_bytes) {
    GuardedOutput out(job.th->make_output(inputs));
    std::vector<at::Tensor> originals;
    for (const at::Tensor& t : inputs) originals.push_back(t.clone());
    out.poison();
    synchronize(stage);
    double before = 0;
    if (extra_bytes) {
      reset_peak_memory();
      before = allocated_bytes();
    }
    job.cand->launch(inputs, out.tensor(), shape);
    synchronize(stage);
    if (extra_bytes) *extra_bytes = std::max(0.0, peak_allocated_bytes() - before);
    out.check_guards(stage);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!at::equal(inputs[i].view(at::kByte), originals[i].view(at::kByte)))
        fail(stage, "the candidate modified input " + std::to_string(i) + (label.empty() ? "" : " " + label) +
                        "; inputs are read-only", ResultStatus::kRejected);
    return compare(out.tensor(), ref, job.tol, shape, stage, label, scale_of(job, inputs));
  }

  void check_determinism(const Job& job, const std::string& stage, uint64_t seed) {
    const JobSpec& spec = *job.spec;
    at::Tensor first;
    for (int run = 0; run < 3; ++run) {
      // Fresh tensors every run, with identical contents.
      std::vector<at::Tensor> in = job.th->make_inputs(spec.shape, spec.dtype, device(), seed);
      GuardedOutput out(job.th->make_output(in));
      out.poison();
      job.cand->launch(in, out.tensor(), spec.shape);
      synchronize(stage);
      out.check_guards(stage);
      at::Tensor bits = out.tensor().contiguous().view(at::kByte).clone();
      if (run == 0) {
        first = bits;
        continue;
      }
      if (!at::equal(first, bits)) {
        const int64_t esize = int64_t(out.tensor().element_size());
        const int64_t differ =
            (first.reshape({-1, esize}) != bits.reshape({-1, esize})).any(1).sum().item<int64_t>();
        fail(stage, "outputs of runs 1 and " + std::to_string(run + 1) + " on identical inputs differ bitwise in " +
                        std::to_string(differ) + " of " + std::to_string(out.tensor().numel()) +
                        " elements; the candidate is not deterministic (e.g. floating-point atomics)");
      }
    }
  }

  SandboxReply measure(const Job& job, std::vector<at::Tensor> inputs, uint64_t seed, std::string& stage,
                       double compile_ms) {
    const JobSpec& spec = *job.spec;
    const MeasureOptions& mo = spec.measure;
    const c10::Device dev = device();

    // Input sets the timed calls rotate over, so that a result kept from an earlier call is
    // never the right one by accident of identical inputs.
    // Each set is kept twice: the copy, compared after timing, shows a write to an input.
    double set_bytes = 0;
    for (const at::Tensor& t : inputs) set_bytes += double(t.nbytes());
    const int sets_n = int(std::clamp(rotation_budget_bytes() / std::max(1.0, 2 * set_bytes), 1.0, 4.0));
    std::vector<std::vector<at::Tensor>> sets;
    sets.push_back(std::move(inputs));
    for (int s = 1; s < sets_n; ++s) sets.push_back(job.th->make_inputs(spec.shape, spec.dtype, dev, seed + 100 + s));
    std::vector<at::Tensor> copies;
    for (const auto& set : sets)
      for (const at::Tensor& t : set) copies.push_back(t.clone());
    GuardedOutput out(job.th->make_output(sets[0]));
    at::Tensor& o = out.tensor();
    auto cand_call = [&](int i) { job.cand->launch(sets[size_t(i % sets_n)], o, spec.shape); };
    auto base_call = [&](int i) { job.th->baseline(sets[size_t(i % sets_n)], o); };
    auto poison = [&] { out.poison(); };
    // Outside the timed region: the poison, and what the candidate sets up for these tensors.
    auto cand_prepare = [&](int i) {
      out.poison();
      job.cand->prepare(sets[size_t(i % sets_n)], o, spec.shape);
    };

    for (int i = 0; i < mo.warmup; ++i) {
      poison();
      cand_call(i);
      base_call(i);
    }
    synchronize(stage);
    const Telemetry before = telemetry();
    const bool cold = mo.cold && can_flush();
    const auto t0 = Clock::now();
    measure::PairedSamples samples = measure::sample_alternating(
        mo, [&](int i) { return time_call([&] { cand_prepare(i); }, [&] { cand_call(i); }, cold); },
        [&](int i) {
          return time_call(
              {}, [&] { base_call(i); }, cold);
        },
        [&] { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); });
    synchronize(stage);
    const Telemetry after = telemetry();

    // The timed calls must have kept to their output and left their inputs alone.
    out.check_guards(stage);
    size_t idx = 0;
    for (size_t s = 0; s < sets.size(); ++s)
      for (const at::Tensor& t : sets[s])
        if (!at::equal(t.view(at::kByte), copies[idx++].view(at::kByte)))
          fail(stage, "input set " + std::to_string(s) + " changed while the candidate was timed; inputs are read-only",
               ResultStatus::kRejected);
    copies.clear();

    // Audit: new contents in the first set (same addresses), one more timed call, its output verified.
    enter(stage, "audit");
    std::vector<at::Tensor> fresh = job.th->make_inputs(spec.shape, spec.dtype, dev, seed ^ 0xa0d17);
    for (size_t t = 0; t < fresh.size(); ++t) sets[0][t].copy_(fresh[t]);
    fresh.clear();
    at::Tensor ref = job.th->reference(sets[0]);
    const double audit_us = time_call([&] { cand_prepare(0); }, [&] { cand_call(0); }, cold);
    synchronize(stage);
    out.check_guards(stage);
    try {
      compare(o, ref, job.tol, spec.shape, stage, "", scale_of(job, sets[0]));
    } catch (const StageError& e) {
      fail(stage,
           "the output of a timed call is wrong although verification passed, so the candidate behaves "
           "differently when timed (returns early, skips work or serves results cached from earlier calls): " +
               e.reason,
           ResultStatus::kRejected);
    }
    ref = at::Tensor();

    const measure::Stats c = measure::summarize(samples.candidate_us);
    const measure::Stats b = measure::summarize(samples.baseline_us);
    SandboxReply reply;
    reply.status = ResultStatus::kPass;
    Measurement& m = reply.m;
    m.latency_us = c.median;
    m.mean_us = c.mean;
    m.p10_us = c.p10;
    m.p90_us = c.p90;
    m.cv = c.cv;
    m.samples = c.n;
    m.rel_se = c.rel_se;
    m.baseline_us = b.median;
    m.baseline_p10_us = b.p10;
    m.baseline_p90_us = b.p90;
    m.speedup = c.median > 0 ? b.median / c.median : 0;
    m.compile_ms = compile_ms;
    m.cold_l2 = cold;
    m.input_sets = sets_n;
    m.audit_us = audit_us;
    m.blocking_kernel = blocking();
    m.stop_reason = measure::stop_reason_name(samples.stop);
    roofline(job, m, stage, sets_n * set_bytes + double(o.nbytes()));
    m.sm_clock_mhz = int(after.sm_clock_mhz);
    m.mem_clock_mhz = int(after.mem_clock_mhz);
    m.power_w = after.power_w;
    m.temperature_c = int(after.temperature_c);
    if (before.valid || after.valid) {
      const uint64_t reasons = (before.valid ? before.reasons : 0) | (after.valid ? after.reasons : 0);
      m.clock_reasons = reason_names(reasons);
      m.throttled = (reasons & kThrottleMask) != 0;
    }
    return reply;
  }

  // FLOPs, bytes, achieved rates, ceilings and the roofline floor check. `working_set_bytes`: what
  // the timed calls touch (every rotated input set and the output), held against the cache size.
  void roofline(const Job& job, Measurement& m, const std::string& stage, double working_set_bytes) {
    const JobSpec& spec = *job.spec;
    m.flops = job.kernel->flops(spec.shape);
    m.bytes = job.kernel->bytes(spec.shape, spec.dtype);
    measure::hold_to_ceilings(m, ceilings_, dtype_name(spec.dtype), working_set_bytes);

    // Faster than the hardware can move the bytes (cold timing only: a hot L2 legitimately beats
    // DRAM) or do the FLOPs: the time is not the candidate's work. The floor uses the datasheet
    // where there is one, else the measured ceiling with a 25% margin.
    const double bw = m.datasheet_bandwidth_gbps > 0 ? m.datasheet_bandwidth_gbps : 1.25 * m.peak_bandwidth_gbps;
    const double tf = m.datasheet_tflops > 0 ? m.datasheet_tflops : 1.25 * m.peak_tflops;
    const double floor_us = measure::roofline_floor_us(m.flops, m.cold_l2 ? m.bytes : 0, bw, tf);
    for (double t : {m.latency_us, m.audit_us})
      if (floor_us > 0 && t < floor_us)
        fail(stage,
             "measured " + fmt(t) + " us is below the roofline floor of " + fmt(floor_us) + " us (" + fmt(m.bytes) +
                 " bytes at " + fmt(bw) + " GB/s, " + fmt(m.flops) + " FLOPs at " + fmt(tf) +
                 " TFLOP/s): no honest kernel is that fast, so the timing was fooled",
             ResultStatus::kRejected);
  }

  static at::Tensor scale_of(const Job& job, const std::vector<at::Tensor>& inputs) {
    return job.th->tolerance_scale ? job.th->tolerance_scale(inputs, job.tol) : at::Tensor();
  }

  // One input set, the output and what the candidate allocated itself [MiB].
  double candidate_vram_mb(const Job& job, double extra_bytes) {
    const JobSpec& spec = *job.spec;
    double bytes = job.kernel->bytes(spec.shape, spec.dtype);  // inputs read + output written
    return (bytes + extra_bytes) / (1024.0 * 1024.0);
  }

  // The rule of worker/sandbox/tolerance.h; a failure names the worst element. Returns max
  // |out - ref| over the finite part of the reference.
  static double compare(const at::Tensor& out, const at::Tensor& ref, kernels::Tolerance tol,
                        const std::vector<int64_t>& shape, const std::string& stage, const std::string& label,
                        const at::Tensor& scale = at::Tensor()) {
    at::Tensor o = out.to(at::kFloat).reshape({-1});
    at::Tensor r = ref.to(at::kFloat).reshape({-1});
    if (o.numel() != r.numel())
      fail(stage, "output has " + std::to_string(o.numel()) + " elements; the reference has " +
                      std::to_string(r.numel()));
    at::Tensor finite_ref = at::isfinite(r);
    const Comparison c = compare_with_tolerance(o, r, out.scalar_type(), tol, scale);
    const at::Tensor& ok = c.ok;
    const at::Tensor& diff = c.diff;
    const at::Tensor& allowed = c.allowed;
    const int64_t nbad = (~ok).sum().item<int64_t>();
    at::Tensor finite_diff = at::where(finite_ref, diff, at::zeros_like(diff));
    if (nbad == 0) return o.numel() ? finite_diff.max().item<double>() : 0.0;

    const float inf = std::numeric_limits<float>::infinity();
    at::Tensor excess = at::where(ok, at::full({}, -inf, diff.options()),
                                  at::where(at::isfinite(diff), diff - allowed, at::full({}, inf, diff.options())));
    const int64_t worst = excess.argmax().item<int64_t>();
    std::string where;
    int64_t rem = worst;
    std::vector<int64_t> idx(shape.size(), 0);
    for (size_t d = shape.size(); d-- > 0;) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
    }
    for (size_t d = 0; d < idx.size(); ++d) where += (d ? ", " : "") + std::to_string(idx[d]);
    const double got = o[worst].item<double>();
    const double want = r[worst].item<double>();
    const int64_t nonfinite = (~at::isfinite(o) & finite_ref).sum().item<int64_t>();
    std::ostringstream ss;
    ss << nbad << " of " << o.numel() << " outputs" << (label.empty() ? "" : " " + label)
       << " outside |out - ref| <= " << fmt(tol.atol) << (scale.defined() ? " * scale" : "") << " + "
       << fmt(tol.rtol) << " * |ref|";
    if (nonfinite) ss << " (" << nonfinite << " NaN or inf where the reference is finite, e.g. elements never written)";
    ss << "; worst at [" << where << "]: got " << fmt(got) << ", expected " << fmt(want);
    if (std::isfinite(want)) ss << " (|err| " << fmt(std::abs(got - want)) << ")";
    fail(stage, ss.str());
  }
};

// ---- cpu backend ----

class CpuHarness final : public HarnessBase {
 public:
  CpuHarness() {
    // Candidates run on one thread, so the baseline does too: the speedup compares kernels, not
    // thread counts.
    at::set_num_threads(1);
    ceilings_.copy_bandwidth_gbps = measure_memcpy();
    ceilings_.cache_bytes = measure::cpu_last_level_cache_bytes();
    ceilings_.datasheet_match = "the cpu backend has no datasheet entry; ceilings are measured only";
  }

  SandboxHello hello() override {
    SandboxHello h;
    h.ready = true;
    h.device = "cpu";
    h.copy_bandwidth_gbps = ceilings_.copy_bandwidth_gbps;
    h.ceilings = ceilings_;
    h.torch_version = TORCH_VERSION;
    return h;
  }

 protected:
  c10::Device device() const override { return c10::Device(c10::kCPU); }

  std::unique_ptr<Candidate> load(const SandboxRequest& request, const kernels::KernelSpec&) override {
    return load_cpu_candidate(request.artifact_path, request.entry, request.job.kernel_type, request.job.dtype);
  }

  double time_call(const std::function<void()>& prepare, const std::function<void()>& fn, bool) override {
    if (prepare) prepare();
    auto t0 = Clock::now();
    fn();
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }

  void synchronize(const std::string&) override {}
  double rotation_budget_bytes() override { return double(256) * 1024 * 1024; }

 private:
  // memcpy of a buffer much larger than the last-level cache, bytes read + written per second.
  static double measure_memcpy() {
    const size_t bytes = size_t(256) << 20;
    std::vector<char> a(bytes, 1), b(bytes, 0);
    double best_s = 1e30;
    for (int i = 0; i < 4; ++i) {
      auto t0 = Clock::now();
      std::memcpy(b.data(), a.data(), bytes);
      double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (i > 0) best_s = std::min(best_s, s);  // the first pass pays for page faults
      a[size_t(i) * 4096] = b[bytes - 1 - size_t(i)];  // keep the copies observable
    }
    return 2.0 * double(bytes) / best_s / 1e9;
  }
};

// ---- cuda backend ----
#ifndef AK_NO_CUDA

// Holds the GPU until the host releases it, so that every launch of a timed region is queued
// before the region starts and host launch latency stays out of the events. Spins on a word of
// mapped host memory; gives up after timeout_ns (writing 1 to the next word) so that a host that
// never releases it cannot hang the device. Hand-written PTX, JIT-compiled by the driver for the
// device at hand: the sandbox needs no NVRTC.
constexpr const char* kBlockingKernelPtx = R"(
.version 7.0
.target sm_70
.address_size 64

.visible .entry ak_block_until_released(.param .u64 flag_ptr, .param .u64 timeout_ns)
{
  .reg .pred %p<3>;
  .reg .b32 %r<3>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [flag_ptr];
  ld.param.u64 %rd2, [timeout_ns];
  mov.u64 %rd3, %globaltimer;
$L_wait:
  ld.volatile.u32 %r1, [%rd1];
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra $L_done;
  mov.u64 %rd4, %globaltimer;
  sub.u64 %rd5, %rd4, %rd3;
  setp.lt.u64 %p2, %rd5, %rd2;
  @%p2 bra $L_wait;
  mov.u32 %r2, 1;
  st.volatile.u32 [%rd1+4], %r2;
$L_done:
  ret;
}
)";

class CudaHarness final : public HarnessBase {
 public:
  explicit CudaHarness(int device) : device_(device) {
    try {
      init();
    } catch (const StageError& e) {
      error_ = e.reason;
    } catch (const c10::Error& e) {
      error_ = std::string("libtorch could not use the GPU: ") + e.what_without_backtrace();
    } catch (const std::exception& e) {
      error_ = std::string("cannot use the GPU: ") + e.what();
    }
  }
  ~CudaHarness() override {
    if (drv_ && start_) drv_->cuEventDestroy(start_);
    if (drv_ && stop_) drv_->cuEventDestroy(stop_);
    if (drv_ && flag_) drv_->cuMemFreeHost(const_cast<uint32_t*>(flag_));
  }

  SandboxHello hello() override {
    SandboxHello h;
    h.ready = error_.empty();
    h.device = name_.empty() ? "cuda:" + std::to_string(device_) : name_;
    h.copy_bandwidth_gbps = ceilings_.copy_bandwidth_gbps;
    h.ceilings = ceilings_;
    h.torch_version = TORCH_VERSION;
    h.error = error_;
    return h;
  }

 protected:
  c10::Device device() const override { return c10::Device(c10::kCUDA, c10::DeviceIndex(device_)); }

  std::unique_ptr<Candidate> load(const SandboxRequest& request, const kernels::KernelSpec& spec) override {
    if (!error_.empty()) fail("load", error_);
    c10::cuda::set_device(c10::DeviceIndex(device_));
    const CudaDevice dev{drv_.get(), arch_, max_shared_optin_};
    if (request.job.requires_.backend == Backend::kTriton)
      return load_triton_candidate(dev, request.artifact_path, spec, request.job.config, request.job.dtype);
    return load_cuda_candidate(dev, request.artifact_path, request.entry, spec, request.job.config, request.job.dtype);
  }

  double time_call(const std::function<void()>& prepare, const std::function<void()>& fn, bool cold) override {
    if (prepare) prepare();
    if (cold) flush_.fill_(static_cast<int64_t>(++flushes_ & 0x7f));
    const bool hold = use_blocker_;
    if (hold) {
      flag_[0] = 0;
      flag_[1] = 0;
      uint64_t timeout_ns = kBlockerTimeoutNs;
      void* args[] = {&flag_device_, &timeout_ns};
      check(drv_->cuLaunchKernel(blocker_, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr), "cuLaunchKernel (blocking kernel)",
            "measure");
    }
    check(drv_->cuEventRecord(start_, nullptr), "cuEventRecord", "");
    fn();
    check(drv_->cuEventRecord(stop_, nullptr), "cuEventRecord", "");
    if (hold) __atomic_store_n(&flag_[0], 1u, __ATOMIC_SEQ_CST);
    check(drv_->cuEventSynchronize(stop_), "cuEventSynchronize", "");
    float ms = 0;
    check(drv_->cuEventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime", "");
    if (hold && __atomic_load_n(&flag_[1], __ATOMIC_SEQ_CST) != 0) {
      // The queued work waited on the host (a synchronising op); holding the GPU only delays it.
      use_blocker_ = false;
      std::fprintf(stderr, "autokernel-sandbox: blocking kernel timed out; timing without it from now on\n");
    }
    return double(ms) * 1000.0;
  }

  void synchronize(const std::string& stage) override { check(drv_->cuCtxSynchronize(), "cuCtxSynchronize", stage); }
  bool can_flush() const override { return flush_.defined(); }
  bool blocking() const override { return use_blocker_; }

  void reset_peak_memory() override {
    c10::cuda::CUDACachingAllocator::emptyCache();
    c10::cuda::CUDACachingAllocator::resetPeakStats(c10::DeviceIndex(device_));
  }
  double allocated_bytes() override { return stat(false); }
  double peak_allocated_bytes() override { return stat(true); }

  // A quarter of the free device memory (cached blocks returned first), at most 8 GiB.
  double rotation_budget_bytes() override {
    c10::cuda::CUDACachingAllocator::emptyCache();
    size_t free_b = 0, total_b = 0;
    if (CUresult r = drv_->cuMemGetInfo(&free_b, &total_b); r != CUDA_SUCCESS) {
      std::fprintf(stderr, "autokernel-sandbox: cuMemGetInfo failed (%s); timing with one input set\n",
                   drv_->error_text(r).c_str());
      return 0;
    }
    return std::min(double(free_b) / 4.0, double(8) * 1024 * 1024 * 1024);
  }

  Telemetry telemetry() override { return nvml_ ? nvml_->read() : Telemetry{}; }

  std::string device_broken() override {
    if (!drv_ || !error_.empty()) return "";
    CUresult r = drv_->cuCtxSynchronize();
    if (r == CUDA_SUCCESS) return "";
    return "the CUDA context is unusable (" + drv_->error_text(r) + "); this sandbox exits";
  }

 private:
  static constexpr uint64_t kBlockerTimeoutNs = 200'000'000;  // 200 ms

  double stat(bool peak) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::DeviceIndex(device_));
    const auto agg = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    return double(peak ? stats.allocated_bytes[agg].peak : stats.allocated_bytes[agg].current);
  }

  void check(CUresult r, const char* what, const std::string& stage) {
    if (r != CUDA_SUCCESS)
      fail(stage, std::string(what) + " failed: " + drv_->error_text(r) + " (a fault in the candidate or the device)",
           ResultStatus::kCrash);
  }

  void init() {
    auto drv = CudaDriver::load();
    if (!drv.ok()) fail("sandbox", drv.status().message());
    drv_ = drv.value();
    int count = 0;
    CUresult r = drv_->cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS) fail("sandbox", "cuDeviceGetCount failed: " + drv_->error_text(r));
    if (device_ < 0 || device_ >= count)
      fail("sandbox", "--device " + std::to_string(device_) + " asked for, but the driver sees " +
                          std::to_string(count) + " GPU(s)");
    CUdevice dev = 0;
    drv_->cuDeviceGet(&dev, device_);
    char name[256] = {0};
    drv_->cuDeviceGetName(name, sizeof name - 1, dev);
    name_ = name;
    int major = 0, minor = 0;
    drv_->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    drv_->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    arch_ = arch_for_compute_capability(major, minor);
    drv_->cuDeviceGetAttribute(&max_shared_optin_, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev);
    if (!at::hasCUDA() || c10::cuda::device_count() <= device_)
      fail("sandbox", "libtorch sees " + std::to_string(at::hasCUDA() ? c10::cuda::device_count() : 0) +
                          " CUDA device(s); device " + std::to_string(device_) +
                          " is not usable from libtorch (CUDA build of torch? driver too old?)");
    c10::cuda::set_device(c10::DeviceIndex(device_));
    // The first allocation creates the primary context, which the driver API calls then share.
    at::Tensor probe = at::empty({1}, at::TensorOptions().device(device()));
    int l2_bytes = 0;
    drv_->cuDeviceGetAttribute(&l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev);
    ceilings_.cache_bytes = l2_bytes;
    // Twice the L2, at least 64 MiB, so that no input line survives a flush.
    const int64_t flush_bytes = std::max<int64_t>(int64_t(2) * l2_bytes, int64_t(64) << 20);
    flush_ = at::empty({flush_bytes}, at::TensorOptions().device(device()).dtype(at::kByte));
    CUcontext ctx = nullptr;
    drv_->cuCtxGetCurrent(&ctx);
    if (!ctx) fail("sandbox", "no CUDA context is current after libtorch initialised device " + std::to_string(device_));
    r = drv_->cuEventCreate(&start_, CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS) r = drv_->cuEventCreate(&stop_, CU_EVENT_DEFAULT);
    if (r != CUDA_SUCCESS) fail("sandbox", "cuEventCreate failed: " + drv_->error_text(r));
    init_blocker();

    char bus[64] = {0};
    std::string pci_device;
    if (drv_->cuDeviceGetPCIBusId(bus, sizeof bus - 1, dev) == CUDA_SUCCESS) {
      pci_device = pci_device_id(bus);
      auto nvml = Nvml::open(bus);
      if (nvml.ok()) {
        nvml_ = nvml.value();
      } else {
        std::fprintf(stderr, "autokernel-sandbox: %s; measurements carry no telemetry\n",
                     nvml.status().message().c_str());
      }
    }
    calibrate(pci_device, dev);
  }

  void init_blocker() {
    CUresult r = drv_->cuModuleLoadData(&blocker_module_, kBlockingKernelPtx);
    if (r == CUDA_SUCCESS) r = drv_->cuModuleGetFunction(&blocker_, blocker_module_, "ak_block_until_released");
    void* host = nullptr;
    if (r == CUDA_SUCCESS)
      r = drv_->cuMemHostAlloc(&host, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    if (r == CUDA_SUCCESS) {
      flag_ = static_cast<volatile uint32_t*>(host);
      r = drv_->cuMemHostGetDevicePointer(&flag_device_, host, 0);
    }
    if (r != CUDA_SUCCESS) {
      std::fprintf(stderr, "autokernel-sandbox: no blocking kernel (%s); launch latency may show in short timings\n",
                   drv_->error_text(r).c_str());
      return;
    }
    use_blocker_ = true;
  }

  // The worker's own ceilings: copy bandwidth and cuBLAS GEMM rates; then the datasheet.
  void calibrate(const std::string& pci_device, CUdevice dev) {
    ceilings_.copy_bandwidth_gbps = measure_copy();
    struct G {
      const char* key;
      at::ScalarType type;
      int64_t n;
      bool tf32;
    };
    for (const G& g : {G{"fp16", at::kHalf, 8192, false}, G{"bf16", at::kBFloat16, 8192, false},
                       G{"tf32", at::kFloat, 8192, true}, G{"fp32", at::kFloat, 4096, false}})
      ceilings_.gemm_tflops[g.key] = measure_gemm(g.type, g.n, g.tf32);
    size_t total = 0;
    drv_->cuDeviceTotalMem(&total, dev);
    DatasheetMatch ds = match_datasheet(pci_device, name_, int64_t(total));
    ceilings_.datasheet_match = ds.how;
    if (ds.entry) {
      ceilings_.datasheet_name = ds.entry->name;
      ceilings_.datasheet_bandwidth_gbps = ds.entry->memory_bandwidth_gbps;
      ceilings_.datasheet_tflops = {{"fp16", ds.entry->fp16_tflops},
                                    {"bf16", ds.entry->bf16_tflops},
                                    {"tf32", ds.entry->tf32_tflops},
                                    {"fp32", ds.entry->fp32_tflops}};
    }
  }

  // Device-to-device copy of 1 GiB, bytes read + written per second, best of 5.
  double measure_copy() {
    const int64_t bytes = int64_t(1) << 30;
    auto opts = at::TensorOptions().dtype(at::kByte).device(device());
    double best_us = 1e30;
    {
      at::Tensor a = at::ones({bytes}, opts);
      at::Tensor b = at::empty({bytes}, opts);
      b.copy_(a);  // warm-up
      synchronize("sandbox");
      for (int i = 0; i < 5; ++i) best_us = std::min(best_us, time_call({}, [&] { b.copy_(a); }, false));
    }
    c10::cuda::CUDACachingAllocator::emptyCache();
    return 2.0 * double(bytes) / (best_us * 1e-6) / 1e9;
  }

  // n x n x n GEMM through at::mm (cuBLAS), best of 5 after 2 warm-ups [TFLOP/s].
  double measure_gemm(at::ScalarType type, int64_t n, bool tf32) {
    auto& ctx = at::globalContext();
    const bool saved = ctx.allowTF32CuBLAS();
    ctx.setAllowTF32CuBLAS(tf32);
    double best_us = 1e30;
    {
      auto opts = at::TensorOptions().dtype(type).device(device());
      at::Tensor a = at::randn({n, n}, opts);
      at::Tensor b = at::randn({n, n}, opts);
      at::Tensor c = at::empty({n, n}, opts);
      for (int i = 0; i < 2; ++i) at::mm_out(c, a, b);
      synchronize("sandbox");
      for (int i = 0; i < 5; ++i) best_us = std::min(best_us, time_call({}, [&] { at::mm_out(c, a, b); }, false));
    }
    ctx.setAllowTF32CuBLAS(saved);
    c10::cuda::CUDACachingAllocator::emptyCache();
    return 2.0 * double(n) * double(n) * double(n) / (best_us * 1e-6) / 1e12;
  }

  int device_;
  std::shared_ptr<const CudaDriver> drv_;
  std::shared_ptr<const Nvml> nvml_;
  std::string name_;
  std::string arch_;
  std::string error_;
  int max_shared_optin_ = 48 * 1024;
  CUevent start_ = nullptr;
  CUevent stop_ = nullptr;
  at::Tensor flush_;  // L2 flush buffer: cold timing
  uint64_t flushes_ = 0;
  CUmodule blocker_module_ = nullptr;
  CUfunction blocker_ = nullptr;
  volatile uint32_t* flag_ = nullptr;  // [0]: released by the host, [1]: the blocker timed out
  CUdeviceptr flag_device_ = 0;
  bool use_blocker_ = false;
};
#endif  // AK_NO_CUDA

}  // namespace

std::unique_ptr<Harness> make_harness(Backend backend, int device) {
#ifndef AK_NO_CUDA
  if (backend == Backend::kCuda || backend == Backend::kTriton) return std::make_unique<CudaHarness>(device);
#endif
  return std::make_unique<CpuHarness>();
}

}  // namespace ak::sandbox
