// The only libtorch translation unit of the sandbox besides the kernel types' reference.cc.
#include "worker/sandbox/harness.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <dlfcn.h>
#include <torch/headeronly/version.h>
#include <unistd.h>
#include <xxhash.h>

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
#include <numeric>
#include <sstream>
#include <vector>

#include "kernels/reference.h"
#include "kernels/registry.h"
#include "worker/cuda_driver.h"

namespace ak::sandbox {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// A failure with the stage it happened in; turned into a reply by run().
struct StageError {
  ResultStatus status;
  std::string stage;
  std::string reason;
};

[[noreturn]] void fail(const std::string& stage, const std::string& reason,
                       ResultStatus status = ResultStatus::kFail) {
  throw StageError{status, stage, reason};
}

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// A loaded candidate: launch() runs it once on the inputs, writing out; throws StageError.
class Candidate {
 public:
  virtual ~Candidate() = default;
  virtual void launch(const std::vector<at::Tensor>& inputs, at::Tensor& out) = 0;
};

// Times one call of `fn` [us]; the device's implementation decides how.
using Timer = std::function<double(const std::function<void()>& fn)>;

struct Stats {
  double median = 0, mean = 0, p10 = 0, p90 = 0, cv = 0;
};

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  double pos = q * double(sorted.size() - 1);
  size_t lo = size_t(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = pos - double(lo);
  return sorted[lo] * (1 - frac) + sorted[hi] * frac;
}

// Relative standard error of the median of `v`: 1.2533 * stdev / sqrt(n) / median (the normal
// approximation). Infinite for fewer than two samples.
double rel_se_of_median(std::vector<double> v) {
  const size_t n = v.size();
  if (n < 2) return std::numeric_limits<double>::infinity();
  double mean = 0;
  for (double x : v) mean += x;
  mean /= double(n);
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  var /= double(n - 1);
  std::nth_element(v.begin(), v.begin() + long(n / 2), v.end());
  const double median = v[n / 2];
  if (median <= 0) return std::numeric_limits<double>::infinity();
  return 1.2533 * std::sqrt(var) / std::sqrt(double(n)) / median;
}

Stats summarize(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.median = percentile(v, 0.5);
  s.p10 = percentile(v, 0.1);
  s.p90 = percentile(v, 0.9);
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  double var = 0;
  for (double x : v) var += (x - s.mean) * (x - s.mean);
  var /= double(v.size());
  s.cv = s.mean > 0 ? std::sqrt(var) / s.mean : 0;
  return s;
}

// ---- the harness, shared by both backends ----

class HarnessBase : public Harness {
 public:
  SandboxReply run(const SandboxRequest& request) override {
    SandboxReply reply;
    std::string stage = "load";
    try {
      reply = run_checked(request, stage);
    } catch (const StageError& e) {
      reply.status = e.status;
      reply.stage = e.stage;
      reply.reason = e.reason;
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
      reply.m = Measurement{};
      reply.m.compile_ms = request.compile_ms;
    }
    return reply;
  }

 protected:
  virtual c10::Device device() const = 0;
  virtual std::unique_ptr<Candidate> load(const SandboxRequest& request, const kernels::KernelSpec& spec) = 0;
  virtual Timer timer() = 0;
  virtual void synchronize(const std::string& stage) = 0;  // throws StageError (CRASH) on a device fault
  virtual void reset_peak_memory() {}
  // Evicts the device's last-level cache, queued before the next timed region; returns false
  // where the backend times hot (CPU).
  virtual bool flush_cache() { return false; }
  virtual double peak_memory_mb() { return 0; }
  // Non-empty when the device can no longer be used (the reason).
  virtual std::string device_broken() { return ""; }

  double copy_bandwidth_gbps_ = 0;

 private:
  SandboxReply run_checked(const SandboxRequest& request, std::string& stage) {
    const JobSpec& job = request.job;
    const kernels::KernelSpec* spec = kernels::find(job.kernel_type);
    if (!spec) fail("load", "unknown kernel type '" + job.kernel_type + "'");
    const kernels::TorchHarness* th = kernels::find_harness(job.kernel_type);
    if (!th) fail("load", "kernel type '" + job.kernel_type + "' has no libtorch harness in this sandbox");
    if (std::string bad = spec->check_shape(job.shape); !bad.empty()) fail("load", bad);
    auto tol_it = spec->tolerance.find(job.dtype);
    if (tol_it == spec->tolerance.end())
      fail("load", job.kernel_type + " does not support dtype " + dtype_name(job.dtype));
    const kernels::Tolerance tol = tol_it->second;

    reset_peak_memory();
    stage = "load";
    std::unique_ptr<Candidate> cand = load(request, *spec);

    stage = "verify";
    const uint64_t seed = XXH64(job.job_id.data(), job.job_id.size(), 0x5eed);
    std::vector<at::Tensor> inputs = th->make_inputs(job.shape, job.dtype, device(), seed);
    std::vector<at::Tensor> originals;
    for (const at::Tensor& t : inputs) originals.push_back(t.clone());
    at::Tensor out = th->make_output(inputs);
    at::Tensor ref = th->reference(inputs);

    out.fill_(std::numeric_limits<double>::quiet_NaN());  // poison: an unwritten element fails
    synchronize(stage);
    cand->launch(inputs, out);
    synchronize(stage);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!at::equal(inputs[i], originals[i]))
        fail("verify", "the candidate modified input " + std::to_string(i) + "; inputs are read-only");
    originals.clear();
    const double max_abs_error = compare(out, ref, tol, job.shape);
    // Peak memory counts what the timed calls need (inputs, output, the op's own workspace), not
    // the verification's temporaries.
    ref = at::Tensor();
    reset_peak_memory();

    stage = "measure";
    const MeasureOptions& mo = job.measure;
    Timer time_us = timer();
    auto run_candidate = [&] { cand->launch(inputs, out); };
    auto run_baseline = [&] { th->baseline(inputs, out); };
    for (int i = 0; i < mo.warmup; ++i) {
      run_candidate();
      run_baseline();
    }
    synchronize(stage);
    std::vector<double> cand_us, base_us;
    const int min_samples = std::max(1, mo.min_samples);
    const int max_samples = std::max(min_samples, mo.max_samples);
    const auto t0 = Clock::now();
    bool cold = mo.cold;
    // Candidate and baseline alternate so that drift (clocks, temperature) hits both alike.
    while (true) {
      const int n = int(cand_us.size());
      const double elapsed_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (n >= min_samples) {
        if (n >= max_samples || elapsed_ms >= double(mo.max_time_ms)) break;
        if (mo.noise_target > 0 && rel_se_of_median(cand_us) <= mo.noise_target &&
            rel_se_of_median(base_us) <= mo.noise_target)
          break;
      }
      if (cold) cold = flush_cache();
      cand_us.push_back(time_us(run_candidate));
      if (cold) flush_cache();
      base_us.push_back(time_us(run_baseline));
    }
    synchronize(stage);

    const Stats c = summarize(cand_us);
    const Stats b = summarize(base_us);
    SandboxReply reply;
    reply.status = ResultStatus::kPass;
    Measurement& m = reply.m;
    m.latency_us = c.median;
    m.mean_us = c.mean;
    m.p10_us = c.p10;
    m.p90_us = c.p90;
    m.cv = c.cv;
    m.samples = int(cand_us.size());
    m.baseline_us = b.median;
    m.speedup = c.median > 0 ? b.median / c.median : 0;
    const double seconds = c.median * 1e-6;
    if (seconds > 0) {
      m.throughput_tflops = spec->flops(job.shape) / seconds / 1e12;
      m.bandwidth_gbps = spec->bytes(job.shape, job.dtype) / seconds / 1e9;
    }
    m.peak_bandwidth_gbps = copy_bandwidth_gbps_;
    m.pct_peak = copy_bandwidth_gbps_ > 0 ? 100.0 * m.bandwidth_gbps / copy_bandwidth_gbps_ : 0;
    m.max_abs_error = max_abs_error;
    m.peak_vram_mb = peak_memory_mb();
    m.compile_ms = request.compile_ms;
    m.cold_l2 = cold;
    m.rel_se = rel_se_of_median(cand_us);
    return reply;
  }

  // |out - ref| <= atol + rtol * |ref| everywhere, NaN and inf failing; returns max |out - ref|.
  static double compare(const at::Tensor& out, const at::Tensor& ref, kernels::Tolerance tol,
                        const std::vector<int64_t>& shape) {
    at::Tensor o = out.to(at::kFloat).reshape({-1});
    at::Tensor r = ref.to(at::kFloat).reshape({-1});
    if (o.numel() != r.numel())
      fail("verify", "output has " + std::to_string(o.numel()) + " elements; the reference has " +
                         std::to_string(r.numel()));
    at::Tensor diff = (o - r).abs();
    at::Tensor allowed = r.abs() * tol.rtol + tol.atol;
    at::Tensor ok = diff <= allowed;  // false for NaN and inf
    const int64_t nbad = (~ok).sum().item<int64_t>();
    if (nbad == 0) return diff.max().item<double>();

    at::Tensor excess = at::where(ok, at::full({}, -std::numeric_limits<float>::infinity(), diff.options()),
                                  at::where(at::isfinite(diff), diff - allowed,
                                            at::full({}, std::numeric_limits<float>::infinity(), diff.options())));
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
    const int64_t nonfinite = (~at::isfinite(o)).sum().item<int64_t>();
    std::ostringstream ss;
    ss << nbad << " of " << o.numel() << " outputs outside |out - ref| <= " << fmt(tol.atol) << " + "
       << fmt(tol.rtol) << " * |ref|";
    if (nonfinite) ss << " (" << nonfinite << " NaN or inf, e.g. elements never written)";
    ss << "; worst at [" << where << "]: got " << fmt(got) << ", expected " << fmt(want) << " (|err| "
       << fmt(std::abs(got - want)) << ")";
    fail("verify", ss.str());
  }
};

// ---- cpu backend ----

class CpuCandidate final : public Candidate {
 public:
  CpuCandidate(void* handle, void* entry, const kernels::TorchHarness* th, DType dtype)
      : handle_(handle), entry_(entry), th_(th), dtype_(dtype) {}
  ~CpuCandidate() override { dlclose(handle_); }
  void launch(const std::vector<at::Tensor>& inputs, at::Tensor& out) override {
    int rc = th_->call_cpu(entry_, inputs, out, dtype_);
    if (rc != 0) fail("verify", "candidate returned error code " + std::to_string(rc) + " (0 = success)");
  }

 private:
  void* handle_;
  void* entry_;
  const kernels::TorchHarness* th_;
  DType dtype_;
};

class CpuHarness final : public HarnessBase {
 public:
  CpuHarness() {
    // Candidates run on one thread, so the baseline does too: the speedup compares kernels, not
    // thread counts.
    at::set_num_threads(1);
    copy_bandwidth_gbps_ = measure_memcpy();
  }

  SandboxHello hello() override {
    SandboxHello h;
    h.ready = true;
    h.device = "cpu";
    h.copy_bandwidth_gbps = copy_bandwidth_gbps_;
    h.torch_version = TORCH_VERSION;
    return h;
  }

 protected:
  c10::Device device() const override { return c10::Device(c10::kCPU); }

  std::unique_ptr<Candidate> load(const SandboxRequest& request, const kernels::KernelSpec&) override {
    // dlopen a private copy: the same path loaded twice would return the first (cached) handle,
    // and RTLD_LOCAL keeps the candidate's symbols out of everyone else's way.
    std::string tmpl = (fs::temp_directory_path() / "ak-candidate-XXXXXX.so").string();
    int fd = mkstemps(tmpl.data(), 3);
    if (fd < 0) fail("load", std::string("cannot create a temp file: ") + std::strerror(errno));
    close(fd);
    std::error_code ec;
    fs::copy_file(request.artifact_path, tmpl, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      fs::remove(tmpl);
      fail("load", "cannot read artefact " + request.artifact_path + ": " + ec.message());
    }
    void* h = dlopen(tmpl.c_str(), RTLD_NOW | RTLD_LOCAL);
    fs::remove(tmpl, ec);  // the mapping stays valid
    if (!h) fail("load", std::string("dlopen failed: ") + dlerror());
    void* sym = dlsym(h, request.entry.c_str());
    if (!sym) {
      dlclose(h);
      fail("load", "artefact " + request.artifact_path + " has no symbol '" + request.entry +
                       "'; the candidate must define it extern \"C\"");
    }
    return std::make_unique<CpuCandidate>(h, sym, kernels::find_harness(request.job.kernel_type),
                                          request.job.dtype);
  }

  Timer timer() override {
    return [](const std::function<void()>& fn) {
      auto t0 = Clock::now();
      fn();
      return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    };
  }

  void synchronize(const std::string&) override {}

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

class CudaHarness;

class CudaCandidate final : public Candidate {
 public:
  CudaCandidate(const CudaDriver& drv, CUmodule mod, CUfunction fn, kernels::LaunchGeometry g,
                const kernels::TorchHarness* th)
      : drv_(drv), mod_(mod), fn_(fn), g_(g), th_(th) {}
  ~CudaCandidate() override { drv_.cuModuleUnload(mod_); }
  void launch(const std::vector<at::Tensor>& inputs, at::Tensor& out) override {
    kernels::KernelParams params;
    th_->cuda_params(inputs, out, params);
    CUresult r = drv_.cuLaunchKernel(fn_, g_.grid[0], g_.grid[1], g_.grid[2], g_.block[0], g_.block[1],
                                     g_.block[2], g_.shared_bytes, /*default stream*/ nullptr, params.args(),
                                     nullptr);
    if (r != CUDA_SUCCESS)
      fail("verify", "cuLaunchKernel failed (grid " + std::to_string(g_.grid[0]) + "x" + std::to_string(g_.grid[1]) +
                         "x" + std::to_string(g_.grid[2]) + ", block " + std::to_string(g_.block[0]) + "x" +
                         std::to_string(g_.block[1]) + "x" + std::to_string(g_.block[2]) + ", " +
                         std::to_string(g_.shared_bytes) + " B shared): " + drv_.error_text(r));
  }

 private:
  const CudaDriver& drv_;
  CUmodule mod_;
  CUfunction fn_;
  kernels::LaunchGeometry g_;
  const kernels::TorchHarness* th_;
};

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
  }

  SandboxHello hello() override {
    SandboxHello h;
    h.ready = error_.empty();
    h.device = name_.empty() ? "cuda:" + std::to_string(device_) : name_;
    h.copy_bandwidth_gbps = copy_bandwidth_gbps_;
    h.torch_version = TORCH_VERSION;
    h.error = error_;
    return h;
  }

 protected:
  c10::Device device() const override { return c10::Device(c10::kCUDA, c10::DeviceIndex(device_)); }

  std::unique_ptr<Candidate> load(const SandboxRequest& request, const kernels::KernelSpec& spec) override {
    if (!error_.empty()) fail("load", error_);
    if (!spec.cuda_geometry) fail("load", "kernel type '" + spec.name + "' has no cuda launch geometry");
    c10::cuda::set_device(c10::DeviceIndex(device_));
    std::ifstream in(request.artifact_path, std::ios::binary);
    if (!in) fail("load", "cannot read artefact " + request.artifact_path);
    std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (image.size() < 4 || image.compare(0, 4, "\x7f" "ELF") != 0)
      fail("load", "artefact " + request.artifact_path + " is not a cubin (no ELF header)");
    CUmodule mod = nullptr;
    CUresult r = drv_->cuModuleLoadData(&mod, image.data());
    if (r != CUDA_SUCCESS)
      fail("load", "cuModuleLoadData failed: " + drv_->error_text(r) + " (was the cubin built for " + arch_ + "?)");
    CUfunction fn = nullptr;
    r = drv_->cuModuleGetFunction(&fn, mod, request.entry.c_str());
    if (r != CUDA_SUCCESS) {
      drv_->cuModuleUnload(mod);
      fail("load", "the cubin has no kernel '" + request.entry + "' (" + drv_->error_text(r) +
                       "); declare it extern \"C\" __global__");
    }
    kernels::LaunchGeometry g = spec.cuda_geometry(request.job.config, request.job.shape, request.job.dtype);
    const int64_t threads = int64_t(g.block[0]) * g.block[1] * g.block[2];
    int max_threads = 0;
    drv_->cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn);
    if (max_threads > 0 && threads > max_threads) {
      drv_->cuModuleUnload(mod);
      fail("load", "the kernel can run at most " + std::to_string(max_threads) + " threads per block (registers); "
                   "the config asks for " + std::to_string(threads));
    }
    if (g.shared_bytes > 48 * 1024) {
      r = drv_->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(g.shared_bytes));
      if (r != CUDA_SUCCESS) {
        drv_->cuModuleUnload(mod);
        fail("load", "cannot grant " + std::to_string(g.shared_bytes) + " B of dynamic shared memory: " +
                         drv_->error_text(r));
      }
    }
    return std::make_unique<CudaCandidate>(*drv_, mod, fn, g, kernels::find_harness(request.job.kernel_type));
  }

  // CUDA events on the default stream (the stream libtorch uses too) around one call.
  Timer timer() override {
    return [this](const std::function<void()>& fn) {
      check(drv_->cuEventRecord(start_, nullptr), "cuEventRecord", "measure");
      fn();
      check(drv_->cuEventRecord(stop_, nullptr), "cuEventRecord", "measure");
      check(drv_->cuEventSynchronize(stop_), "cuEventSynchronize", "measure");
      float ms = 0;
      check(drv_->cuEventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime", "measure");
      return double(ms) * 1000.0;
    };
  }

  void synchronize(const std::string& stage) override { check(drv_->cuCtxSynchronize(), "cuCtxSynchronize", stage); }

  // A write of twice the L2 size on the default stream, ahead of the next timed region (the
  // events bracket only the call that follows).
  bool flush_cache() override {
    if (!flush_.defined()) return false;
    flush_.fill_(static_cast<int64_t>(++flushes_ & 0x7f));
    return true;
  }

  void reset_peak_memory() override {
    c10::cuda::CUDACachingAllocator::emptyCache();
    c10::cuda::CUDACachingAllocator::resetPeakStats(c10::DeviceIndex(device_));
  }

  double peak_memory_mb() override {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::DeviceIndex(device_));
    const auto agg = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    // The L2 flush buffer is the harness's, not the job's.
    const double flush_bytes = flush_.defined() ? double(flush_.nbytes()) : 0.0;
    return std::max(0.0, double(stats.allocated_bytes[agg].peak) - flush_bytes) / (1024.0 * 1024.0);
  }

  std::string device_broken() override {
    if (!drv_ || !error_.empty()) return "";
    CUresult r = drv_->cuCtxSynchronize();
    if (r == CUDA_SUCCESS) return "";
    return "the CUDA context is unusable (" + drv_->error_text(r) + "); this sandbox exits";
  }

 private:
  void check(CUresult r, const char* what, const std::string& stage) {
    if (r != CUDA_SUCCESS)
      fail(stage, std::string(what) + " failed: " + drv_->error_text(r) +
                          " (a fault in the candidate or the device)", ResultStatus::kCrash);
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
    arch_ = "sm_" + std::to_string(major) + std::to_string(minor) + (major == 9 ? "a" : "");
    if (!at::hasCUDA() || c10::cuda::device_count() <= device_)
      fail("sandbox", "libtorch sees " + std::to_string(at::hasCUDA() ? c10::cuda::device_count() : 0) +
                          " CUDA device(s); device " + std::to_string(device_) +
                          " is not usable from libtorch (CUDA build of torch? driver too old?)");
    c10::cuda::set_device(c10::DeviceIndex(device_));
    // The first allocation creates the primary context, which the driver API calls then share.
    at::Tensor probe = at::empty({1}, at::TensorOptions().device(device()));
    int l2_bytes = 0;
    drv_->cuDeviceGetAttribute(&l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev);
    // Twice the L2, at least 64 MiB, so that no input line survives a flush.
    const int64_t flush_bytes = std::max<int64_t>(int64_t(2) * l2_bytes, int64_t(64) << 20);
    flush_ = at::empty({flush_bytes}, at::TensorOptions().device(device()).dtype(at::kByte));
    CUcontext ctx = nullptr;
    drv_->cuCtxGetCurrent(&ctx);
    if (!ctx) fail("sandbox", "no CUDA context is current after libtorch initialised device " + std::to_string(device_));
    r = drv_->cuEventCreate(&start_, CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS) r = drv_->cuEventCreate(&stop_, CU_EVENT_DEFAULT);
    if (r != CUDA_SUCCESS) fail("sandbox", "cuEventCreate failed: " + drv_->error_text(r));
    copy_bandwidth_gbps_ = measure_copy();
  }

  // Device-to-device copy of 1 GiB, bytes read + written per second, best of 5.
  double measure_copy() {
    const int64_t bytes = int64_t(1) << 30;
    auto opts = at::TensorOptions().dtype(at::kByte).device(device());
    double best_ms = 1e30;
    {
      at::Tensor a = at::ones({bytes}, opts);
      at::Tensor b = at::empty({bytes}, opts);
      b.copy_(a);  // warm-up
      synchronize("sandbox");
      Timer t = timer();
      for (int i = 0; i < 5; ++i) best_ms = std::min(best_ms, t([&] { b.copy_(a); }) / 1000.0);
    }
    c10::cuda::CUDACachingAllocator::emptyCache();
    return 2.0 * double(bytes) / (best_ms * 1e-3) / 1e9;
  }

  int device_;
  std::shared_ptr<const CudaDriver> drv_;
  std::string name_;
  std::string arch_;
  std::string error_;
  CUevent start_ = nullptr;
  CUevent stop_ = nullptr;
  at::Tensor flush_;       // L2 flush buffer (issue "Trustworthy measurement": cold timing)
  uint64_t flushes_ = 0;
};

}  // namespace

std::unique_ptr<Harness> make_harness(Backend backend, int device) {
  if (backend == Backend::kCuda) return std::make_unique<CudaHarness>(device);
  return std::make_unique<CpuHarness>();
}

}  // namespace ak::sandbox
