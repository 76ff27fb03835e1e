#include "worker/compiler.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "common/file.h"
#include "common/hash.h"
#include "common/process.h"
#include "kernels/registry.h"
#include "worker/triton/compile_script.h"

namespace ak {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxLogBytes = 8 * 1024;

#define AK_NVRTC_CHECK(call)                                                                \
  do {                                                                                      \
    nvrtcResult ak_nvrtc_r_ = (call);                                                       \
    if (ak_nvrtc_r_ != NVRTC_SUCCESS)                                                       \
      return ::ak::Status::internal(std::string(#call) + " failed at " __FILE__ ":" +       \
                                    std::to_string(__LINE__) + ": " + nvrtcGetErrorString(ak_nvrtc_r_)); \
  } while (0)

std::string truncate_log(std::string log) {
  if (log.size() > kMaxLogBytes) {
    log.resize(kMaxLogBytes);
    log += "\n[log truncated to 8 KiB]";
  }
  return log;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// A name in `dir` unique across threads and processes, for write-then-rename.
fs::path temp_path(const fs::path& dir, const std::string& stem, const std::string& ext) {
  static std::atomic<uint64_t> counter{0};
  return dir / (".tmp-" + stem + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + ext);
}

struct ProcessResult {
  int exit_code = -1;  // -1: killed by a signal or could not start
  std::string output;  // stdout and stderr together
};

// Runs argv[0] (searched in PATH) with stdin from /dev/null and stdout and stderr captured in
// `log_path`, and waits for it.
Result<ProcessResult> run_process(const std::vector<std::string>& argv, const fs::path& log_path) {
  SpawnOptions o;
  o.null_stdin = true;
  o.output_path = log_path.string();
  auto child = ChildProcess::spawn(argv, o);
  if (!child.ok())
    return Status::unavailable(child.status().message() + "; install a C++ compiler or set CompilerOptions::host_cxx");
  child->wait();
  const int wstatus = child->wait_status().value_or(0);
  ProcessResult r;
  r.exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
  auto log = read_file(log_path.string());
  if (log.ok()) r.output = std::move(log.value());
  std::error_code ec;
  fs::remove(log_path, ec);
  return r;
}

// "sm_90a" for Hopper (arch-specific features such as wgmma need it), other architectures as given.
Result<std::string> nvrtc_arch(const Capabilities& caps) {
  std::string arch = caps.arch;
  if (arch.empty() && !caps.compute_capability.empty()) {
    std::string cc = caps.compute_capability;
    cc.erase(std::remove(cc.begin(), cc.end(), '.'), cc.end());
    arch = "sm_" + cc;
  }
  if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0)
    return Status::invalid("cuda compile needs the device architecture (e.g. \"sm_90a\") in capabilities; got arch '" +
                           caps.arch + "', compute capability '" + caps.compute_capability + "'");
  for (size_t i = 3; i < arch.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(arch[i])) && !(i + 1 == arch.size() && arch[i] == 'a'))
      return Status::invalid("malformed architecture '" + arch + "'; expected sm_<digits> or sm_<digits>a");
  if (arch == "sm_90") arch = "sm_90a";
  return arch;
}

// The toolkit include directory (for cuda_fp16.h and friends), found next to the libnvrtc that
// this process loaded: <toolkit>/lib64/libnvrtc.so -> <toolkit>/include.
std::string toolkit_include_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) && info.dli_fname) {
    std::error_code ec;
    fs::path lib = fs::canonical(info.dli_fname, ec);
    if (!ec) {
      for (fs::path dir = lib.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
        if (fs::exists(dir / "include" / "cuda_fp16.h", ec)) return (dir / "include").string();
      }
    }
  }
  if (fs::exists("/usr/local/cuda/include/cuda_fp16.h")) return "/usr/local/cuda/include";
  return "";
}

class RealCompiler final : public Compiler {
 public:
  explicit RealCompiler(CompilerOptions options) : options_(std::move(options)) {}

  Result<CompiledArtifact> compile(const JobSpec& job, const Capabilities& caps) override {
    const kernels::KernelSpec* spec = kernels::find(job.kernel_type);
    if (!spec) return Status::invalid("unknown kernel type '" + job.kernel_type + "'; the registry has no such entry");
    const Backend backend = job.requires_.backend;
    auto bs = spec->backends.find(backend);
    if (bs == spec->backends.end())
      return Status::invalid("kernel type '" + job.kernel_type + "' has no " + backend_name(backend) + " backend");
    for (const auto& [name, value] : job.config)
      if (!is_identifier(name)) return Status::invalid("config name '" + name + "' is not a C identifier");
    const std::string& source = job.source.empty() ? bs->second.source : job.source;

    std::error_code ec;
    fs::create_directories(options_.cache_dir, ec);
    if (ec) return Status::internal("cannot create cache dir " + options_.cache_dir + ": " + ec.message());

    if (backend == Backend::kCpu) return compile_cpu(job, caps, source, bs->second.entry);
    if (backend == Backend::kTriton) return compile_triton(job, caps, *spec, source, bs->second.entry);
    return compile_cuda(job, caps, source, bs->second.entry);
  }

 private:
  // The options text, compiler identity and target that together with the source key the cache.
  struct Key {
    std::string options_blob;
    std::string source_hash;
    std::string options_hash;
    std::string cache_key;
  };
  static Key make_key(const std::string& source, const std::vector<std::string>& options,
                      const std::string& compiler_version, const std::string& arch) {
    Key k;
    for (const std::string& o : options) k.options_blob += o + '\n';
    k.options_blob += '\0' + compiler_version + '\0' + arch;
    k.source_hash = xxh64_hex(source);
    k.options_hash = xxh64_hex(k.options_blob);
    k.cache_key = xxh64_hex(source + '\0' + k.options_blob);
    return k;
  }

  // `c++ --version` plus what -march=native resolves to on this host, computed once.
  const std::string& host_compiler_identity() {
    std::call_once(host_once_, [&] {
      fs::path dir = options_.cache_dir;
      auto v = run_process({options_.host_cxx, "--version"}, temp_path(dir, "version", ".log"));
      auto t = run_process({options_.host_cxx, "-march=native", "-Q", "--help=target"}, temp_path(dir, "target", ".log"));
      std::string id = v.ok() ? v->output.substr(0, v->output.find('\n')) : "unknown";
      if (t.ok()) id += " target:" + xxh64_hex(t->output);
      host_identity_ = id;
    });
    return host_identity_;
  }

  // Moves a finished artefact into the cache under its final name (atomic: readers see the whole
  // file or none); the temporary is removed if that fails.
  static Status install(const fs::path& tmp, const fs::path& final_path) {
    std::error_code ec;
    fs::rename(tmp, final_path, ec);
    if (!ec) return {};
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return Status::internal("cannot move the compiled artefact into " + final_path.string() + ": " + ec.message());
  }

  // The artefact record for `key`, a cache hit when its file exists already.
  static CompiledArtifact lookup(const Key& key, const std::string& entry, const fs::path& final_path) {
    CompiledArtifact art;
    art.entry = entry;
    art.source_hash = key.source_hash;
    art.options_hash = key.options_hash;
    art.path = final_path.string();
    std::error_code ec;
    art.cache_hit = fs::exists(final_path, ec);
    return art;
  }

  Result<CompiledArtifact> compile_cpu(const JobSpec& job, const Capabilities& caps, const std::string& source,
                                       const std::string& entry) {
    std::vector<std::string> options = {"-O3", "-march=native", "-shared", "-fPIC", "-std=c++17"};
    for (const auto& [name, value] : job.config) options.push_back("-D" + name + "=" + std::to_string(value));
    const std::string arch = caps.arch.empty() ? "host" : caps.arch;
    Key key = make_key(source, options, host_compiler_identity(), arch);

    const fs::path dir = options_.cache_dir;
    const fs::path final_path = dir / ("cpu-" + key.cache_key + ".so");
    CompiledArtifact art = lookup(key, entry, final_path);
    if (art.cache_hit) return art;
    std::error_code ec;

    const auto t0 = std::chrono::steady_clock::now();
    const fs::path src_path = temp_path(dir, key.cache_key, ".cc");
    const fs::path out_path = temp_path(dir, key.cache_key, ".so");
    if (Status s = write_file(src_path.string(), source); !s.ok()) return s;
    std::vector<std::string> argv = {options_.host_cxx};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), {"-o", out_path.string(), src_path.string()});
    auto run = run_process(argv, temp_path(dir, key.cache_key, ".log"));
    fs::remove(src_path, ec);
    if (!run.ok()) return run.status();
    if (run->exit_code != 0) {
      fs::remove(out_path, ec);
      return Status::invalid("host compiler failed (exit " + std::to_string(run->exit_code) + ") for " +
                             job.kernel_type + " config " + config_string(job.config) + ":\n" +
                             truncate_log(run->output));
    }
    if (Status s = install(out_path, final_path); !s.ok()) return s;
    art.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return art;
  }

  Result<CompiledArtifact> compile_cuda(const JobSpec& job, const Capabilities& caps, const std::string& source,
                                        const std::string& entry) {
    auto arch = nvrtc_arch(caps);
    if (!arch.ok()) return arch.status();
    if (job.config.count("AK_DTYPE"))
      return Status::invalid("config must not set AK_DTYPE; the compiler defines it from the job's dtype");
    std::call_once(nvrtc_once_, [&] {
      int major = 0, minor = 0;
      nvrtcVersion(&major, &minor);
      nvrtc_version_ = "nvrtc " + std::to_string(major) + "." + std::to_string(minor);
      include_dir_ = toolkit_include_dir();
    });

    std::vector<std::string> options = {"--gpu-architecture=" + arch.value(), "-default-device", "--std=c++17"};
    if (!include_dir_.empty()) options.push_back("-I" + include_dir_);
    options.push_back("-DAK_DTYPE=" + std::to_string(static_cast<int>(job.dtype)));
    for (const auto& [name, value] : job.config) options.push_back("-D" + name + "=" + std::to_string(value));
    // The include directory's location does not change the code; keep it out of the key so
    // that caches agree across hosts with the toolkit installed elsewhere.
    std::vector<std::string> keyed;
    for (const std::string& o : options)
      if (o.compare(0, 2, "-I") != 0) keyed.push_back(o);
    Key key = make_key(source, keyed, nvrtc_version_, arch.value());

    const fs::path dir = options_.cache_dir;
    const fs::path final_path = dir / ("cuda-" + key.cache_key + ".cubin");
    CompiledArtifact art = lookup(key, entry, final_path);
    if (art.cache_hit) return art;

    const auto t0 = std::chrono::steady_clock::now();
    auto cubin = nvrtc_compile(job, source, options, arch.value());
    if (!cubin.ok()) return cubin.status();
    if (Status s = write_file_atomically(final_path.string(), cubin.value()); !s.ok()) return s;
    art.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return art;
  }

  // `python -c "import triton"`'s version and compile.py written into the cache dir, once.
  Status triton_setup() {
    std::call_once(triton_once_, [&] {
      const fs::path dir = options_.cache_dir;
      const std::string script(triton::kCompileScript);
      const fs::path path = dir / ("triton-compile-" + xxh64_hex(script) + ".py");
      std::error_code ec;
      if (!fs::exists(path, ec)) {
        if (Status s = write_file_atomically(path.string(), script); !s.ok()) {
          triton_status_ = s;
          return;
        }
      }
      triton_script_ = path.string();
      auto v = run_process({options_.python, "-c", "import triton; print(triton.__version__)"},
                           temp_path(dir, "triton-version", ".log"));
      if (!v.ok()) {
        triton_status_ = Status::unavailable("cannot run " + options_.python + " for the triton backend: " +
                                             v.status().message());
      } else if (v->exit_code != 0) {
        triton_status_ = Status::unavailable(options_.python + " cannot import triton (the triton backend needs it):\n" +
                                             truncate_log(v->output));
      } else {
        triton_version_ = "triton " + v->output.substr(0, v->output.find('\n'));
      }
    });
    return triton_status_;
  }

  Result<CompiledArtifact> compile_triton(const JobSpec& job, const Capabilities& caps, const kernels::KernelSpec& spec,
                                          const std::string& source, const std::string& entry) {
    auto arch = nvrtc_arch(caps);
    if (!arch.ok()) return arch.status();
    if (!spec.triton_signature || !spec.triton_grid)
      return Status::invalid("kernel type '" + spec.name + "' declares no triton signature or grid");
    if (Status s = triton_setup(); !s.ok()) return s;
    std::vector<std::string> options = {"--kernel", entry, "--signature", spec.triton_signature(job.dtype),
                                        "--arch", arch.value()};
    int64_t warps = 4, stages = 3;
    for (const auto& [name, value] : job.config) {
      if (name == "AK_NUM_WARPS") {
        warps = value;
      } else if (name == "AK_NUM_STAGES") {
        stages = value;
      } else {
        options.insert(options.end(), {"--constexpr", name + "=" + std::to_string(value)});
      }
    }
    options.insert(options.end(), {"--num-warps", std::to_string(warps), "--num-stages", std::to_string(stages)});
    Key key = make_key(source, options, triton_version_ + '\0' + triton_script_, arch.value());

    const fs::path dir = options_.cache_dir;
    const fs::path stem = dir / ("triton-" + key.cache_key);
    const fs::path final_path = stem.string() + ".cubin";
    CompiledArtifact art = lookup(key, entry, final_path);
    if (art.cache_hit) return art;
    std::error_code ec;

    const auto t0 = std::chrono::steady_clock::now();
    const fs::path work = temp_path(dir, key.cache_key, ".triton");
    fs::create_directories(work, ec);
    if (ec) return Status::internal("cannot create " + work.string() + ": " + ec.message());
    struct Cleanup {
      fs::path p;
      ~Cleanup() {
        std::error_code e;
        fs::remove_all(p, e);
      }
    } cleanup{work};
    const fs::path src_path = work / "candidate.py";
    if (Status s = write_file(src_path.string(), source); !s.ok()) return s;
    // The generic build, then (if the type names any) the one that assumes 16-divisible values.
    std::vector<std::pair<std::string, std::vector<std::string>>> builds = {{"", {}}};
    if (!spec.triton_divisible.empty()) {
      std::vector<std::string> div;
      for (const std::string& p : spec.triton_divisible) div.insert(div.end(), {"--divisible", p});
      builds.push_back({".div16", div});
    }
    for (const auto& [suffix, extra] : builds) {
      const fs::path out = work / ("out" + suffix);
      std::vector<std::string> argv = {options_.python, triton_script_, "--source", src_path.string(), "--out-dir",
                                       out.string()};
      argv.insert(argv.end(), options.begin(), options.end());
      argv.insert(argv.end(), extra.begin(), extra.end());
      auto run = run_process(argv, work / ("compile" + suffix + ".log"));
      if (!run.ok()) return run.status();
      if (run->exit_code != 0)
        return Status::invalid("triton compile failed (exit " + std::to_string(run->exit_code) + ") for " +
                               job.kernel_type + " " + dtype_name(job.dtype) + " config " + config_string(job.config) +
                               " on " + arch.value() + ":\n" + truncate_log(run->output));
    }
    // Metadata first, the generic cubin last: its presence is the cache hit.
    for (const auto& [suffix, extra] : builds) {
      const fs::path out = work / ("out" + suffix);
      if (Status s = install(out / "kernel.json", stem.string() + suffix + ".json"); !s.ok()) return s;
      if (!suffix.empty())
        if (Status s = install(out / "kernel.cubin", stem.string() + suffix + ".cubin"); !s.ok()) return s;
    }
    if (Status s = install(work / "out" / "kernel.cubin", final_path); !s.ok()) return s;
    art.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return art;
  }

  static Result<std::string> nvrtc_compile(const JobSpec& job, const std::string& source,
                                           const std::vector<std::string>& options, const std::string& arch) {
    nvrtcProgram prog = nullptr;
    const std::string name = job.kernel_type + ".cu";
    AK_NVRTC_CHECK(nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr));
    struct Destroy {
      nvrtcProgram* p;
      ~Destroy() { nvrtcDestroyProgram(p); }
    } destroy{&prog};
    std::vector<const char*> copts;
    for (const std::string& o : options) copts.push_back(o.c_str());
    nvrtcResult rc = nvrtcCompileProgram(prog, static_cast<int>(copts.size()), copts.data());
    if (rc != NVRTC_SUCCESS) {
      size_t log_size = 0;
      std::string log;
      if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
        log.resize(log_size);
        if (nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) log.clear();
        while (!log.empty() && log.back() == '\0') log.pop_back();
      }
      return Status::invalid(std::string("nvrtc failed (") + nvrtcGetErrorString(rc) + ") for " + job.kernel_type +
                             " " + dtype_name(job.dtype) + " config " + config_string(job.config) + " on " + arch +
                             ":\n" + truncate_log(log));
    }
    size_t size = 0;
    AK_NVRTC_CHECK(nvrtcGetCUBINSize(prog, &size));
    if (size == 0)
      return Status::internal("nvrtc produced no cubin for " + arch + "; expected a real architecture, not PTX only");
    std::string cubin(size, '\0');
    AK_NVRTC_CHECK(nvrtcGetCUBIN(prog, cubin.data()));
    return cubin;
  }

  const CompilerOptions options_;
  std::once_flag host_once_;
  std::string host_identity_;
  std::once_flag triton_once_;
  Status triton_status_;
  std::string triton_script_;
  std::string triton_version_;
  std::once_flag nvrtc_once_;
  std::string nvrtc_version_;
  std::string include_dir_;
};

}  // namespace

std::unique_ptr<Compiler> make_compiler(const CompilerOptions& options) {
  return std::make_unique<RealCompiler>(options);
}

}  // namespace ak
