#include "worker/compiler.h"

#include <dlfcn.h>
#include <fcntl.h>
#ifndef AK_NO_CUDA
#include <nvrtc.h>
#endif
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <vector>

#include <spdlog/spdlog.h>
#include "common/file.h"
#include "common/hash.h"
#include "common/process.h"
#include "kernels/registry.h"
#include "worker/cuda_driver.h"
#include "worker/triton/compile_script.h"

namespace ak {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxLogBytes = 8 * 1024;

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

// A compile's private folder: its only writable view (the worker installs the result from it),
// removed with everything in it when the compile returns.
struct PrivateFolder {
  fs::path path;
  explicit PrivateFolder(fs::path p) : path(std::move(p)) {}
  PrivateFolder(const PrivateFolder&) = delete;
  PrivateFolder& operator=(const PrivateFolder&) = delete;
  ~PrivateFolder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  Status create() const {
    std::error_code ec;
    fs::create_directories(path, ec);
    return ec ? Status::internal("cannot create " + path.string() + ": " + ec.message()) : Status{};
  }
};

struct ProcessResult {
  int exit_code = -1;  // -1: killed by a signal or could not start
  std::string output;  // stdout and stderr together
};

// How a compile runs: until `deadline`, with `confinement`, in `work_dir` (its private folder).
struct Sandboxing {
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  Confinement confinement;
  CgroupJob cgroup;  // the compile's memory and pids limits; what it left is killed with it
  bool scrub_env = false;
  std::vector<std::string> env;  // NAME=value on top
};

// Runs argv[0] (searched in PATH) with stdin from /dev/null and stdout and stderr captured in
// `log_path`, and waits for it (kTimedOut, its process group killed, past the deadline).
Result<ProcessResult> run_process(const std::vector<std::string>& argv, const fs::path& log_path,
                                  const Sandboxing& box = {}) {
  SpawnOptions o;
  o.null_stdin = true;
  o.output_path = log_path.string();
  o.new_process_group = true;
  o.confinement = box.confinement;
  if (box.scrub_env) {
    o.inherit_env = false;
    o.keep_env = kept_env_names();
    o.env = {"HOME=/tmp", "TMPDIR=/tmp"};
  }
  o.env.insert(o.env.end(), box.env.begin(), box.env.end());
  auto child = ChildProcess::spawn(argv, o);
  if (!child.ok())
    return Status::unavailable(child.status().message() + "; install a C++ compiler or set CompilerOptions::host_cxx");
  if (!child->wait_until(box.deadline)) {
    child->kill_group();
    std::error_code ec;
    fs::remove(log_path, ec);
    return Status::timed_out("the compiler ran past the job's timeout and was killed");
  }
  child->kill_group();  // what it started goes with it
  const int wstatus = child->wait_status().value_or(0);
  ProcessResult r;
  r.exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
  auto log = read_file(log_path.string());
  if (log.ok()) r.output = std::move(log.value());
  std::error_code ec;
  fs::remove(log_path, ec);
  return r;
}

// An `#include` whose path is absolute or climbs with "..": refused before any compiler reads it
// (the error names the line, never the file's contents).
Status check_includes(const std::string& source) {
  std::istringstream in(source);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line[i] != '#') continue;
    i = line.find_first_not_of(" \t", i + 1);
    if (i == std::string::npos || line.compare(i, 7, "include") != 0) continue;
    const size_t open = line.find_first_of("\"<", i + 7);
    if (open == std::string::npos) continue;
    const char close = line[open] == '<' ? '>' : '"';
    const size_t end = line.find(close, open + 1);
    const std::string path = line.substr(open + 1, end == std::string::npos ? std::string::npos : end - open - 1);
    if (!path.empty() && (path[0] == '/' || path.find("..") != std::string::npos))
      return Status::invalid("line " + std::to_string(number) +
                             ": #include of an absolute path or one with '..' is refused; a candidate is one "
                             "source and may include only the toolchain's headers");
  }
  return Status::ok_status();
}

// The compiler log with every diagnostic located outside `own` (the candidate's source file)
// withheld: an included file's text (and tokens a diagnostic quotes from it) never leave the worker.
std::string withhold_foreign_diagnostics(const std::string& log, const std::vector<std::string>& own) {
  std::istringstream in(log);
  std::string line, out;
  bool keep_context = false;  // source lines quoted under a kept diagnostic
  int withheld = 0;
  while (std::getline(in, line)) {
    // "file:line:col: kind: ..." (host compilers) or "file(line): kind: ..." (NVRTC).
    static const std::regex kLocated(R"(^[^ ].*?(:[0-9]+(:[0-9]+)?:|\([0-9]+\):) )");
    const bool located = std::regex_search(line, kLocated);
    bool mine = false;
    for (const std::string& o : own) mine = mine || line.rfind(o, 0) == 0;
    if (located) {
      keep_context = mine;
      if (mine) {
        out += line + "\n";
      } else {
        ++withheld;
      }
      continue;
    }
    if (line.rfind("In file included from ", 0) == 0 || line.rfind("                 from ", 0) == 0) continue;
    // The PTX assembler's messages (insufficient registers, an unknown instruction of an asm
    // statement) quote PTX lines and instruction names, never an included file's text.
    static const std::regex kPtxas(R"(^ptxas (application ptx input, line [0-9]+; )?(error|fatal|warning|info) *:)");
    if (std::regex_search(line, kPtxas)) {
      out += line + "\n";
      continue;
    }
    if (keep_context || line.find("compilation terminated") != std::string::npos ||
        line.find("error detected in the compilation") != std::string::npos)
      out += line + "\n";
  }
  if (withheld > 0)
    out += "[" + std::to_string(withheld) + " diagnostic(s) located outside the candidate's source withheld]\n";
  return out;
}

// The xxh64 stored beside a cached artefact.
std::string hash_path(const fs::path& artefact) { return artefact.string() + ".xxh64"; }

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
#ifdef AK_NO_CUDA
  return "";
#else
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
#endif
}

// Absolute cache folder: a confined compile resolves its folder after its private /tmp and
// read-only root are mounted, where a path relative to a working directory under /tmp is not its
// view.
CompilerOptions with_absolute_cache(CompilerOptions o) {
  std::error_code ec;
  const fs::path abs = fs::absolute(o.cache_dir, ec);
  if (!ec && !o.cache_dir.empty()) o.cache_dir = abs.lexically_normal().string();
  return o;
}

class RealCompiler final : public Compiler {
 public:
  explicit RealCompiler(CompilerOptions options) : options_(with_absolute_cache(std::move(options))) {}

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
    if (backend != Backend::kTriton)
      if (Status s = check_includes(source); !s.ok()) return s;

    std::error_code ec;
    fs::create_directories(options_.cache_dir, ec);
    if (ec) return Status::internal("cannot create cache dir " + options_.cache_dir + ": " + ec.message());

    if (backend == Backend::kCpu) return compile_cpu(job, caps, source, bs->second.entry);
#ifdef AK_NO_CUDA
    return Status::unavailable(kNoCudaBackend);
#endif
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
    if (auto bytes = read_file(tmp.string()); bytes.ok()) {
      if (Status s = write_file_atomically(hash_path(final_path), xxh64_hex(*bytes)); !s.ok()) return s;
    }
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
    if (art.cache_hit) {
      // Verified on every read: bytes that do not match the hash stored beside them are a miss.
      auto bytes = read_file(final_path.string());
      auto stored = read_file(hash_path(final_path));
      if (!bytes.ok() || !stored.ok() || xxh64_hex(*bytes) != *stored) {
        spdlog::error("compile cache: {} does not match its stored hash ({}); compiling it again", final_path.string(),
                      stored.ok() ? "mismatch" : "no hash stored");
        art.cache_hit = false;
      }
    }
    return art;
  }

  // The Python's installation and its virtual environment (bin/python -> <prefix>), which a
  // confined triton compile needs to see.
  std::vector<std::string> python_prefixes() const {
    const std::string python = find_executable(options_.python);
    std::error_code ec;
    return {fs::absolute(python, ec).parent_path().parent_path().string(),
            fs::weakly_canonical(python, ec).parent_path().parent_path().string()};
  }

  // A compile of `job` in its private folder `work`: until the job's timeout, confined by the
  // policy (the folder bound writable, handed to the child's uid), with a scrubbed environment.
  Sandboxing sandboxing(const JobSpec& job, const fs::path& work, std::vector<std::string> needed = {}) {
    Sandboxing box;
    box.scrub_env = true;
    box.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(1, job.timeout_ms));
    const ConfinementPolicy& policy = options_.confinement;
    if (policy.for_child().any()) {
      std::error_code ec;
      for (const auto& e : fs::recursive_directory_iterator(work, ec))
        (void)!lchown(e.path().c_str(), policy.child_uid(), policy.child_gid());
      (void)!chown(work.c_str(), policy.child_uid(), policy.child_gid());
      ConfinementPolicy::ChildView view;
      view.binds = {{work.string(), work.string(), false}};
      view.needed = std::move(needed);
      box.cgroup = policy.make_cgroup("compile-" + std::to_string(getpid()) + "-" + work.filename().string());
      view.cgroups = box.cgroup.dirs();
      box.confinement = policy.for_child(view);
    }
    return box;
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

    const auto t0 = std::chrono::steady_clock::now();
    const PrivateFolder work(temp_path(dir, key.cache_key, ".compile"));
    if (Status s = work.create(); !s.ok()) return s;
    const fs::path src_path = work.path / "candidate.cc";
    const fs::path out_path = work.path / "candidate.so";
    if (Status s = write_file(src_path.string(), source); !s.ok()) return s;
    Sandboxing box = sandboxing(job, work.path);
    std::vector<std::string> argv = {options_.host_cxx, "-fno-diagnostics-show-caret"};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), {"-o", out_path.string(), src_path.string()});
    auto run = run_process(argv, temp_path(dir, key.cache_key, ".log"), box);
    if (!run.ok()) return run.status();
    if (run->exit_code != 0) {
      return Status::invalid("host compiler failed (exit " + std::to_string(run->exit_code) + ") for " +
                             job.kernel_type + " config " + config_string(job.config) + ":\n" +
                             truncate_log(withhold_foreign_diagnostics(run->output, {src_path.string()})));
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
#ifndef AK_NO_CUDA
      nvrtcVersion(&major, &minor);
#endif
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
    const PrivateFolder work(temp_path(dir, key.cache_key, ".nvrtc"));
    if (Status s = work.create(); !s.ok()) return s;
    const std::string name = job.kernel_type + ".cu";  // the program's name in diagnostics
    const fs::path src_path = work.path / "candidate.cu";
    const fs::path out_path = work.path / "candidate.cubin";
    if (Status s = write_file(src_path.string(), source); !s.ok()) return s;
    const std::string exe = nvrtc_executable();
    Sandboxing box = sandboxing(job, work.path, {exe, include_dir_});
    std::vector<std::string> argv = {exe, name, src_path.string(), out_path.string()};
    argv.insert(argv.end(), options.begin(), options.end());
    auto run = run_process(argv, temp_path(dir, key.cache_key, ".log"), box);
    if (!run.ok()) return run.status();
    const std::string what =
        job.kernel_type + " " + dtype_name(job.dtype) + " config " + config_string(job.config) + " on " + arch.value();
    if (run->exit_code == 1) {
      // autokernel-nvrtc: the result's name, then the log.
      const size_t eol = run->output.find('\n');
      const std::string result = run->output.substr(0, eol);
      const std::string log = eol == std::string::npos ? "" : run->output.substr(eol + 1);
      return Status::invalid("nvrtc failed (" + result + ") for " + what + ":\n" +
                             truncate_log(withhold_foreign_diagnostics(log, {name})));
    }
    if (run->exit_code == -1)  // a signal: the candidate crashed the compiler (or hit its limits)
      return Status::invalid("nvrtc crashed for " + what + " (killed by a signal):\n" +
                             truncate_log(withhold_foreign_diagnostics(run->output, {name})));
    if (run->exit_code != 0)
      return Status::internal(exe + " exited " + std::to_string(run->exit_code) + " for " + what + ":\n" +
                              truncate_log(run->output));
    if (Status s = install(out_path, final_path); !s.ok()) return s;
    art.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!run->output.empty()) art.diagnostics = truncate_log(withhold_foreign_diagnostics(run->output, {name}));
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

    const auto t0 = std::chrono::steady_clock::now();
    const PrivateFolder work(temp_path(dir, key.cache_key, ".triton"));
    if (Status s = work.create(); !s.ok()) return s;
    const fs::path src_path = work.path / "candidate.py";
    if (Status s = write_file(src_path.string(), source); !s.ok()) return s;
    // The generic build, then (if the type names any) the one that assumes 16-divisible values.
    std::vector<std::pair<std::string, std::vector<std::string>>> builds = {{"", {}}};
    if (!spec.triton_divisible.empty()) {
      std::vector<std::string> div;
      for (const std::string& p : spec.triton_divisible) div.insert(div.end(), {"--divisible", p});
      builds.push_back({".div16", div});
    }
    for (const auto& [suffix, extra] : builds) {
      const fs::path out = work.path / ("out" + suffix);
      std::vector<std::string> argv = {options_.python, triton_script_, "--source", src_path.string(), "--out-dir",
                                       out.string()};
      argv.insert(argv.end(), options.begin(), options.end());
      argv.insert(argv.end(), extra.begin(), extra.end());
      Sandboxing box = sandboxing(job, work.path, python_prefixes());
      box.env = {"TRITON_CACHE_DIR=" + (work.path / "cache").string()};
      if (box.confinement.any()) box.confinement.binds.push_back({triton_script_, triton_script_, true});
      auto run = run_process(argv, dir / (".tmp-" + key.cache_key + "-compile" + suffix + ".log"), box);
      if (!run.ok()) return run.status();
      if (run->exit_code != 0)
        return Status::invalid("triton compile failed (exit " + std::to_string(run->exit_code) + ") for " +
                               job.kernel_type + " " + dtype_name(job.dtype) + " config " + config_string(job.config) +
                               " on " + arch.value() + ":\n" + truncate_log(run->output));
    }
    // Metadata first, the generic cubin last: its presence is the cache hit.
    for (const auto& [suffix, extra] : builds) {
      const fs::path out = work.path / ("out" + suffix);
      if (Status s = install(out / "kernel.json", stem.string() + suffix + ".json"); !s.ok()) return s;
      if (!suffix.empty())
        if (Status s = install(out / "kernel.cubin", stem.string() + suffix + ".cubin"); !s.ok()) return s;
    }
    if (Status s = install(work.path / "out" / "kernel.cubin", final_path); !s.ok()) return s;
    art.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return art;
  }

  // autokernel-nvrtc: the configured one, else the one beside this process's executable.
  std::string nvrtc_executable() const {
    return options_.nvrtc_path.empty() ? self_exe_dir() + "/autokernel-nvrtc" : options_.nvrtc_path;
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

std::string ptxas_notes(const std::string& diagnostics) {
  std::string out;
  size_t start = 0;
  while (start < diagnostics.size()) {
    size_t end = diagnostics.find('\n', start);
    if (end == std::string::npos) end = diagnostics.size();
    const std::string line = diagnostics.substr(start, end - start);
    if (line.rfind("ptxas", 0) == 0) out += (out.empty() ? "" : " | ") + line;
    start = end + 1;
  }
  for (char& ch : out)
    if (ch == '\r' || ch == '\n') ch = ' ';
  return out.size() > 1000 ? out.substr(0, 1000) + "..." : out;
}

}  // namespace ak
