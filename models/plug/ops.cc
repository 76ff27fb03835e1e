// libautokernel_ops.so: the farm's tuned kernels as PyTorch operators, for plugging them into a
// running model (models/verify_model.py, models/README.md "Verify").
//
//   torch.ops.load_library(".../libautokernel_ops.so")
//   n = torch.ops.autokernel.load("/job/plug.json")           # loads every entry of the manifest
//   y = torch.ops.autokernel.call(i, [x])                     # entry i on its inputs
//   p = torch.ops.autokernel.plan("/job/plug.json")           # launch plans, for export_hf.py
//
// The manifest (written by the worker's ModelJobRunner, worker/model_job_runner.h):
//   {"device": "cuda:0" | "cpu", "arch": "sm_90a",
//    "entries": [{"kernel_type": "softmax", "backend": "cuda", "dtype": "bf16", "shape": [4096, 1024],
//                 "config": {"AK_THREADS": 256, ...}, "artifact": "/path/x.cubin", "entry": "softmax"}, ...]}
// Each entry is one tuned kernel for one shape and dtype: it is called exactly as the sandbox
// verified and timed it (worker/sandbox/candidate.h: the kernel type's harness builds the
// parameters, its spec the launch geometry), so call() accepts only inputs of the kind the
// harness makes for that shape (sizes, dtype, contiguous, on the manifest's device) and refuses
// anything else with an error naming what differs; the caller falls back to PyTorch's op.
// The output is allocated by the type's harness (make_output). cuda launches go to PyTorch's
// current stream, so the kernels order with the model's other ops and can be captured in a graph.
//
// Not thread-safe: one model on one thread, as verify_model.py runs it.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/reference.h"
#include "kernels/registry.h"
#include "worker/cuda_driver.h"
#include "worker/sandbox/candidate.h"

namespace ak::plug {
namespace {

struct Entry {
  std::string kernel_type;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const kernels::TorchHarness* harness = nullptr;
  std::unique_ptr<sandbox::Candidate> candidate;
  std::vector<std::vector<int64_t>> input_sizes;  // what the harness makes for `shape`
  std::vector<at::ScalarType> input_dtypes;
  c10::Device device = c10::Device(c10::kCPU);
};

std::vector<Entry>& entries() {
  static std::vector<Entry> e;
  return e;
}

// Without iostreams: built with g++ 13 on the GPU host (torch 2.11.0+cu130), this library's first
// std::ostringstream insertion in the model's Python process crashed with SIGSEGV in
// std::ostream::_M_insert<long> (2026-12-06; the signature of pytorch/pytorch#109923, two copies
// of libstdc++'s stream code in one process). Built with g++ 12 it had run there (2026-12-05).
std::string sizes_text(c10::IntArrayRef s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

// One string, so c10::str passes it through without a stream (see sizes_text).
[[noreturn]] void refuse(const std::string& what) { TORCH_CHECK(false, std::string("autokernel: ") + what); }

nlohmann::json read_manifest(const std::string& manifest_path) {
  std::ifstream in(manifest_path);
  if (!in) refuse("cannot read manifest " + manifest_path);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    refuse("manifest " + manifest_path + " is not JSON: " + e.what());
  }
  return doc;
}

// Loads the manifest's entries after those loaded before; returns how many it loaded.
int64_t load(std::string manifest_path) {
  const nlohmann::json doc = read_manifest(manifest_path);
  const std::string device_text = doc.value("device", "cpu");
  const c10::Device device(device_text);
  sandbox::CudaDevice cuda;
  std::shared_ptr<const CudaDriver> drv;
  if (device.is_cuda()) {
    auto d = CudaDriver::load();
    if (!d.ok()) refuse(d.status().message());
    drv = d.value();
    // Initialises the device's primary context on this thread, as the sandbox does.
    (void)at::empty({1}, at::TensorOptions().device(device));
    cuda.drv = drv.get();
    cuda.arch = doc.value("arch", "");
    CUdevice dev = 0;
    drv->cuDeviceGet(&dev, device.index() < 0 ? 0 : device.index());
    drv->cuDeviceGetAttribute(&cuda.max_shared_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev);
    // TMA tensor maps (Hopper on): written by the farm's writer kernel on the call's stream, so a
    // CUDA graph that captures a call captures its maps too (sandbox/candidate.h, map_writer).
    int major = 0;
    drv->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    cuda.tensor_maps = major >= 9;
    if (cuda.tensor_maps) {
      try {
        cuda.map_writer = sandbox::load_tensor_map_writer(*drv);
      } catch (const sandbox::StageError& e) {
        // (a driver older than CUDA 12.3's cannot compile its PTX): the maps still go by host copy
        // outside graphs; a captured call runs its kernel's path without TMA.
        std::fprintf(stderr, "autokernel: %s; captured calls run without TMA\n", e.reason.c_str());
      }
    }
  }
  int64_t n = 0;
  try {
    for (const auto& e : doc.at("entries")) {
      Entry x;
      x.kernel_type = e.at("kernel_type").get<std::string>();
      const kernels::KernelSpec* spec = kernels::find(x.kernel_type);
      if (!spec) refuse("unknown kernel type '" + x.kernel_type + "' in " + manifest_path);
      x.harness = kernels::find_harness(x.kernel_type);
      if (!x.harness) refuse("kernel type '" + x.kernel_type + "' has no libtorch harness");
      const std::string dtype = e.at("dtype").get<std::string>();
      const std::optional<DType> dt = parse_dtype(dtype);
      if (!dt) refuse("unknown dtype '" + dtype + "' in " + manifest_path);
      x.dtype = *dt;
      x.shape = e.at("shape").get<std::vector<int64_t>>();
      if (std::string bad = spec->check_shape(x.shape); !bad.empty()) refuse(bad);
      const auto config = e.value("config", std::map<std::string, int64_t>{});
      const std::string backend = e.at("backend").get<std::string>();
      const std::string artifact = e.at("artifact").get<std::string>();
      if (backend == "cpu") {
        if (!device.is_cpu()) refuse("a cpu kernel in a manifest for " + device_text);
        x.candidate = sandbox::load_cpu_candidate(artifact, e.at("entry").get<std::string>(), x.kernel_type, x.dtype);
      } else if (backend == "cuda" || backend == "triton") {
        if (!device.is_cuda()) refuse("a " + backend + " kernel in a manifest for " + device_text);
        x.candidate = backend == "cuda" ? sandbox::load_cuda_candidate(cuda, artifact, e.at("entry").get<std::string>(),
                                                                       *spec, config, x.dtype)
                                        : sandbox::load_triton_candidate(cuda, artifact, *spec, config, x.dtype);
      } else {
        refuse("unknown backend '" + backend + "' in " + manifest_path);
      }
      // The inputs the sandbox verified the kernel on, by their sizes and dtypes only: made on the
      // meta device (no memory), or on the CPU where a harness needs real values.
      std::vector<at::Tensor> like;
      try {
        like = x.harness->make_inputs(x.shape, x.dtype, c10::Device(c10::kMeta), 1);
      } catch (const c10::Error&) {
        like = x.harness->make_inputs(x.shape, x.dtype, c10::Device(c10::kCPU), 1);
      }
      for (const at::Tensor& t : like) {
        x.input_sizes.push_back(t.sizes().vec());
        x.input_dtypes.push_back(t.scalar_type());
      }
      x.device = device;
      entries().push_back(std::move(x));
      ++n;
    }
  } catch (const sandbox::StageError& e) {
    refuse("cannot load a kernel of " + manifest_path + ": " + e.reason);
  } catch (const nlohmann::json::exception& e) {
    refuse("manifest " + manifest_path + ": " + e.what());
  }
  return n;
}

at::Tensor call(int64_t index, std::vector<at::Tensor> inputs) {
  if (index < 0 || index >= int64_t(entries().size()))
    refuse("no loaded kernel " + std::to_string(index) + " (" + std::to_string(entries().size()) + " loaded)");
  Entry& e = entries()[size_t(index)];
  // Built only for a refusal: call() runs once per replaced op per forward.
  const auto what = [&] { return e.kernel_type + " " + sizes_text(e.shape) + " " + dtype_name(e.dtype); };
  if (inputs.size() != e.input_sizes.size())
    refuse(what() + " takes " + std::to_string(e.input_sizes.size()) + " inputs, got " + std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    if (!t.defined()) refuse(what() + ": input " + std::to_string(i) + " is undefined");
    if (!t.sizes().equals(e.input_sizes[i]) || t.scalar_type() != e.input_dtypes[i])
      refuse(what() + ": input " + std::to_string(i) + " is " + sizes_text(t.sizes()) + " " +
             std::string(c10::toString(t.scalar_type())) + ", the kernel takes " + sizes_text(e.input_sizes[i]) + " " +
             c10::toString(e.input_dtypes[i]));
    if (!t.is_contiguous()) refuse(what() + ": input " + std::to_string(i) + " is not contiguous");
    if (t.device().type() != e.device.type() || (e.device.has_index() && t.device() != e.device))
      refuse(what() + ": input " + std::to_string(i) + " is on " + t.device().str() + ", the kernel on " +
             e.device.str());
  }
  at::Tensor out = e.harness->make_output(inputs);
  if (e.device.is_cuda())  // PyTorch's current stream on the inputs' device, as its own ops use
    e.candidate->set_stream(c10::cuda::getCurrentCUDAStream(inputs.at(0).device().index()).stream());
  try {
    e.candidate->launch(inputs, out, e.shape);
  } catch (const sandbox::StageError& err) {
    refuse(what() + ": " + err.reason);
  }
  return out;
}

// The launch plan of each cuda or triton entry of the manifest (worker/sandbox/candidate.h,
// launch_plan) with the entry's own fields, as a JSON array: what `autokernel export --hf` writes
// into a package that runs the kernels without the farm. Loads nothing and needs no device.
std::string plan(std::string manifest_path) {
  const nlohmann::json doc = read_manifest(manifest_path);
  nlohmann::json out = nlohmann::json::array();
  try {
    for (const auto& e : doc.at("entries")) {
      const std::string kernel_type = e.at("kernel_type").get<std::string>();
      const kernels::KernelSpec* spec = kernels::find(kernel_type);
      if (!spec) refuse("unknown kernel type '" + kernel_type + "' in " + manifest_path);
      const std::string dtype = e.at("dtype").get<std::string>();
      const std::optional<DType> dt = parse_dtype(dtype);
      if (!dt) refuse("unknown dtype '" + dtype + "' in " + manifest_path);
      nlohmann::json x = e;
      x["plan"] = nlohmann::json::parse(sandbox::launch_plan(
          e.at("backend").get<std::string>(), e.at("artifact").get<std::string>(), e.value("entry", std::string()),
          *spec, e.value("config", std::map<std::string, int64_t>{}), *dt, e.at("shape").get<std::vector<int64_t>>()));
      out.push_back(std::move(x));
    }
  } catch (const sandbox::StageError& e) {
    refuse("cannot plan a kernel of " + manifest_path + ": " + e.reason);
  } catch (const nlohmann::json::exception& e) {
    refuse("manifest " + manifest_path + ": " + e.what());
  }
  return out.dump();
}

int64_t loaded() { return int64_t(entries().size()); }

}  // namespace
}  // namespace ak::plug

TORCH_LIBRARY(autokernel, m) {
  m.def("load(str manifest) -> int", &ak::plug::load);
  m.def("call(int index, Tensor[] inputs) -> Tensor", &ak::plug::call);
  m.def("loaded() -> int", &ak::plug::loaded);
  m.def("plan(str manifest) -> str", &ak::plug::plan);
}
