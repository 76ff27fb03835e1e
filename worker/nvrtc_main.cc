// autokernel-nvrtc: one NVRTC compile in its own process, so that the worker can confine it and
// kill it at the job's timeout like any other compiler (worker/compiler.h). No libtorch, no
// ZeroMQ: NVRTC and the C library only.
//
//   autokernel-nvrtc NAME SOURCE_FILE OUT_FILE [NVRTC OPTIONS...]
//
// NAME is the program's name in diagnostics ("softmax.cu"). Exit codes:
//   0  the cubin was written to OUT_FILE; stdout holds the compile's log if it has one (the PTX
//      assembler's warnings and performance notes, such as C7518: wgmma serialised);
//   1  the compile failed: the first line of stdout is the NVRTC result's name, the log follows;
//   2  bad usage, or SOURCE_FILE / OUT_FILE could not be read or written (stderr says which);
//   3  NVRTC failed for another reason, or produced no cubin (stderr says why).
#include <nvrtc.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

int fail(int code, const std::string& what) {
  std::cerr << "autokernel-nvrtc: " << what << "\n";
  return code;
}

int run(int argc, char** argv) {
  if (argc < 4) return fail(2, "usage: autokernel-nvrtc NAME SOURCE_FILE OUT_FILE [NVRTC OPTIONS...]");
  const std::string name = argv[1];
  std::ifstream in(argv[2], std::ios::binary);
  if (!in) return fail(2, std::string("cannot read ") + argv[2]);
  std::ostringstream text;
  text << in.rdbuf();
  const std::string source = text.str();

  nvrtcProgram prog = nullptr;
  nvrtcResult rc = nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (rc != NVRTC_SUCCESS) return fail(3, std::string("nvrtcCreateProgram: ") + nvrtcGetErrorString(rc));
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&prog};
  std::vector<const char*> options;
  for (int i = 4; i < argc; ++i) options.push_back(argv[i]);
  rc = nvrtcCompileProgram(prog, static_cast<int>(options.size()), options.data());
  std::string log;
  size_t log_size = 0;
  if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    log.resize(log_size);
    if (nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) log.clear();
    while (!log.empty() && (log.back() == '\0' || log.back() == ' ' || log.back() == '\n')) log.pop_back();
  }
  if (rc != NVRTC_SUCCESS) {
    std::cout << nvrtcGetErrorString(rc) << "\n" << log << std::flush;
    return 1;
  }
  size_t size = 0;
  rc = nvrtcGetCUBINSize(prog, &size);
  if (rc != NVRTC_SUCCESS) return fail(3, std::string("nvrtcGetCUBINSize: ") + nvrtcGetErrorString(rc));
  if (size == 0) return fail(3, "nvrtc produced no cubin; expected a real architecture, not PTX only");
  std::string cubin(size, '\0');
  rc = nvrtcGetCUBIN(prog, cubin.data());
  if (rc != NVRTC_SUCCESS) return fail(3, std::string("nvrtcGetCUBIN: ") + nvrtcGetErrorString(rc));
  std::ofstream out(argv[3], std::ios::binary | std::ios::trunc);
  out.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
  out.close();
  if (!out) return fail(2, std::string("cannot write ") + argv[3]);
  if (!log.empty()) std::cout << log << "\n" << std::flush;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    return fail(3, e.what());
  }
}
