// The torch extension of an `autokernel export --hf` package: one operator per kernel type (per
// family for the norms, whose eps picks the type), each running the farm's tuned kernel when one
// was exported for its inputs' exact sizes and dtype on a CUDA device, and PyTorch's own op (the
// farm's baseline for that type) otherwise.
//
//   torch.ops.<namespace>.softmax(x)                     x [rows, cols]: softmax over dim 1
//   torch.ops.<namespace>.reduce(x), reduce_max(x)       x [rows, cols]: sum, max over dim 1 -> [rows]
//   torch.ops.<namespace>.layernorm(x, weight, bias, eps=1e-5)   over dim 1; the kernel of the eps:
//                                                        layernorm (1e-5), layernorm_e12, layernorm_e6
//   torch.ops.<namespace>.rmsnorm(x, weight, eps=1e-6)   over dim 1: rmsnorm (1e-6), rmsnorm_e5
//   torch.ops.<namespace>.cross_entropy(logits, target)  per row, no reduction -> [rows]
//   torch.ops.<namespace>.matmul(a, b)                   [M, K] @ [K, N]
//   torch.ops.<namespace>.flash_attention(q, k, v), flash_attention_causal(q, k, v)   [B, H, S, D]
//   torch.ops.<namespace>.fused_mlp(x, w_gate, w_up, w_down)   (silu(x w_gate) * (x w_up)) w_down
//   torch.ops.<namespace>.rotary_embedding(x, cos, sin)  x [tokens, heads, dim], tables [tokens, dim/2]
//   torch.ops.<namespace>.tuned_calls() -> int[]         calls that ran each entry's kernel
//   torch.ops.<namespace>.fallback_calls() -> int        calls that ran PyTorch's op
//
// Kernels are launched through the CUDA driver API (libcuda.so.1, opened at the first tuned call,
// so the package imports on machines without a GPU) on PyTorch's current stream of the inputs'
// device, so they order with the model's other work and can be captured in a CUDA graph. PyTorch's
// op runs instead where the tuned kernel was not verified: other sizes or dtypes, inputs that are
// not contiguous or not 16-byte aligned (a view at an offset), inputs that need gradients (the
// operators have no backward formula), or a device that cannot run the cubin (another
// architecture: a warning says so). cross_entropy's targets of -100 (ignore_index) give 0, as
// PyTorch's op does, and other targets outside [0, classes) NaN. Thread-safe.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda.h>
#include <dlfcn.h>
#include <torch/library.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <entries.h>       // csrc/
#include <registration.h>  // torch-ext/

namespace akx {
namespace {

struct Driver {
  CUresult (*ModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*ModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                           void**, void**) = nullptr;
  CUresult (*FuncSetAttribute)(CUfunction, CUfunction_attribute, int) = nullptr;
  CUresult (*FuncGetAttribute)(int*, CUfunction_attribute, CUfunction) = nullptr;
  CUresult (*GetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*CtxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*CtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*DeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*DevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ModuleUnload)(CUmodule) = nullptr;
  CUresult (*DeviceGetAttribute)(int*, CUdevice_attribute, CUdevice) = nullptr;

  std::string error(CUresult r) const {
    const char* s = nullptr;
    if (GetErrorString) GetErrorString(r, &s);
    return s ? std::string(s) : "CUDA error " + std::to_string(int(r));
  }
};

const Driver& driver() {
  static const Driver d = [] {
    Driver x;
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    TORCH_CHECK(h, "autokernel export: cannot open libcuda.so.1 (", dlerror(), ")");
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      TORCH_CHECK(fn, "autokernel export: libcuda.so.1 has no ", name);
    };
    sym(x.ModuleLoadData, "cuModuleLoadData");
    sym(x.ModuleGetFunction, "cuModuleGetFunction");
    sym(x.LaunchKernel, "cuLaunchKernel");
    sym(x.FuncSetAttribute, "cuFuncSetAttribute");
    sym(x.FuncGetAttribute, "cuFuncGetAttribute");
    sym(x.GetErrorString, "cuGetErrorString");
    sym(x.CtxGetCurrent, "cuCtxGetCurrent");
    sym(x.CtxSetCurrent, "cuCtxSetCurrent");
    sym(x.DeviceGet, "cuDeviceGet");
    sym(x.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    sym(x.ModuleUnload, "cuModuleUnload");
    sym(x.DeviceGetAttribute, "cuDeviceGetAttribute");
    return x;
  }();
  return d;
}

// What is kept per device: its primary context (PyTorch's, retained once) and the most shared
// memory, static and dynamic, a block may have there. (The grant below is the sandbox's
// grant_dynamic_shared in worker/cuda_driver.cc; the package builds without the farm's sources.)
struct DeviceState {
  CUcontext ctx = nullptr;
  int max_shared = 48 * 1024;
};
std::mutex g_mu;  // guards g_devices and g_functions
std::map<int, DeviceState> g_devices;

// The primary context of `device` current on this thread (the caller holds a CUDAGuard for it,
// which restores PyTorch's current device afterwards); returns the device's state.
DeviceState make_current(const Driver& d, int device) {
  DeviceState st;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_devices.find(device);
    if (it == g_devices.end()) {
      CUdevice dev = 0;
      TORCH_CHECK(d.DeviceGet(&dev, device) == CUDA_SUCCESS, "autokernel export: no CUDA device ", device);
      TORCH_CHECK(d.DevicePrimaryCtxRetain(&st.ctx, dev) == CUDA_SUCCESS, "autokernel export: no context on device ",
                  device);
      d.DeviceGetAttribute(&st.max_shared, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev);
      it = g_devices.emplace(device, st).first;
    }
    st = it->second;
  }
  CUcontext cur = nullptr;
  d.CtxGetCurrent(&cur);
  if (cur != st.ctx) d.CtxSetCurrent(st.ctx);
  return st;
}

std::atomic<int64_t> g_fallbacks{0};
std::vector<std::atomic<int64_t>>& tuned_counts() {
  static std::vector<std::atomic<int64_t>> c(static_cast<size_t>(kNumEntries));
  return c;
}

// Loaded functions by (entry, build, device), with the dynamic shared memory granted so far; a null
// function marks a cubin the device cannot run.
struct Loaded {
  CUfunction fn = nullptr;
  unsigned granted_shared = 0;  // 0: set before the function's first launch that asks for any
};
std::map<std::tuple<int, int, int>, Loaded> g_functions;

bool matches(const TensorDesc& d, const at::Tensor& t) {
  if (!t.defined() || t.dim() != d.ndim || int(t.scalar_type()) != d.dtype || !t.is_contiguous()) return false;
  if (reinterpret_cast<uintptr_t>(t.const_data_ptr()) % 16 != 0) return false;
  for (int i = 0; i < d.ndim; ++i)
    if (t.size(i) != d.sizes[i]) return false;
  return true;
}

// The entry for these inputs, or -1.
int find(const char* kernel_type, const std::vector<at::Tensor>& inputs) {
  if (inputs.empty() || !inputs[0].is_cuda()) return -1;
  // An input that needs gradients runs PyTorch's op (the kernels have no backward), decided before
  // any data pointer is read: AOTAutograd calls here with fake tensors, which have none.
  if (at::GradMode::is_enabled())
    for (const at::Tensor& t : inputs)
      if (t.defined() && t.requires_grad()) return -1;
  for (int e = 0; e < kNumEntries; ++e) {
    const Entry& x = kEntries[e];
    if (std::strcmp(x.kernel_type, kernel_type) != 0 || x.n_inputs != int(inputs.size())) continue;
    bool ok = true;
    for (int i = 0; ok && i < x.n_inputs; ++i)
      ok = matches(x.inputs[i], inputs[i]) && inputs[i].device() == inputs[0].device();
    if (ok) return e;
  }
  return -1;
}

// The function of `build` of entry e on `device`, loading its module at the first call, with
// `shared_bytes` of dynamic shared memory granted; nullptr when the device cannot run the cubin.
CUfunction function(const Driver& d, int e, int build, int device, const DeviceState& st, unsigned shared_bytes) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto key = std::make_tuple(e, build, device);
  auto it = g_functions.find(key);
  if (it == g_functions.end()) {
    const Build& b = kEntries[e].builds[build];
    CUmodule mod = nullptr;
    CUresult r = d.ModuleLoadData(&mod, b.image);
    Loaded l;
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION) {
      TORCH_WARN("autokernel export: the tuned ", kEntries[e].kernel_type, " kernel was built for ", kArch,
                 " and this device cannot run it (", d.error(r), "); PyTorch's op runs instead");
    } else {
      TORCH_CHECK(r == CUDA_SUCCESS, "autokernel export: cannot load the ", kEntries[e].kernel_type,
                  " kernel: ", d.error(r));
      r = d.ModuleGetFunction(&l.fn, mod, b.function);
      if (r != CUDA_SUCCESS) d.ModuleUnload(mod);
      TORCH_CHECK(r == CUDA_SUCCESS, "autokernel export: the cubin has no kernel ", b.function, ": ", d.error(r));
    }
    it = g_functions.emplace(key, l).first;
  }
  Loaded& l = it->second;
  if (l.fn && shared_bytes > l.granted_shared) {
    // Without the attribute the dynamic limit is 48 KiB less the kernel's static shared memory.
    int static_bytes = 0;
    if (d.FuncGetAttribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, l.fn) != CUDA_SUCCESS) static_bytes = 0;
    TORCH_CHECK(int64_t(shared_bytes) + static_bytes <= st.max_shared, "autokernel export: the ",
                kEntries[e].kernel_type, " kernel asks for ", shared_bytes, " B of shared memory beside ", static_bytes,
                " B static; this device grants a block ", st.max_shared);
    CUresult r = d.FuncSetAttribute(l.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(shared_bytes));
    TORCH_CHECK(r == CUDA_SUCCESS, "autokernel export: cannot grant ", shared_bytes,
                " B of shared memory: ", d.error(r));
    l.granted_shared = shared_bytes;
  }
  return l.fn;
}

// Runs entry e on the inputs; false (nothing launched) when its cubin cannot run on this device.
bool run(int e, const std::vector<at::Tensor>& inputs, at::Tensor& out) {
  const Entry& x = kEntries[e];
  const Driver& d = driver();
  const int device = inputs[0].device().index();
  const c10::cuda::CUDAGuard guard(inputs[0].device());
  const DeviceState st = make_current(d, device);
  std::vector<std::pair<CUfunction, const Variant*>> chosen;
  // The parameters' values first: the aligned build is chosen by them.
  std::vector<std::vector<uint64_t>> values(size_t(x.n_launches));
  out = at::empty(at::IntArrayRef(x.output.sizes, size_t(x.output.ndim)),
                  inputs[0].options().dtype(static_cast<at::ScalarType>(x.output.dtype)));
  at::Tensor workspace;
  if (x.workspace_bytes > 0) {
    workspace = at::empty({x.workspace_bytes}, inputs[0].options().dtype(at::kByte));
  }
  for (int l = 0; l < x.n_launches; ++l) {
    const Launch& launch = x.launches[l];
    for (int p = 0; p < launch.n_params; ++p) {
      const Param& prm = launch.params[p];
      uint64_t v = 0;
      switch (prm.kind) {
        case ParamKind::kInput:
          v = reinterpret_cast<uint64_t>(inputs[size_t(prm.index)].const_data_ptr()) + uint64_t(prm.offset);
          break;
        case ParamKind::kOutput:
          v = reinterpret_cast<uint64_t>(out.data_ptr()) + uint64_t(prm.offset);
          break;
        case ParamKind::kWorkspace:
          v = reinterpret_cast<uint64_t>(workspace.data_ptr()) + uint64_t(prm.offset);
          break;
        case ParamKind::kValue:
          v = uint64_t(prm.index);
          break;
      }
      values[size_t(l)].push_back(v);
    }
    const Variant* var = &launch.plain;
    if (launch.aligned.build >= 0) {
      bool ok = true;
      for (int i = 0; i < launch.n_divisible; ++i) ok = ok && values[size_t(l)][size_t(launch.divisible[i])] % 16 == 0;
      if (ok) var = &launch.aligned;
    }
    CUfunction fn = function(d, e, var->build, device, st, var->shared_bytes);
    if (!fn) return false;
    chosen.emplace_back(fn, var);
  }
  const CUstream stream = c10::cuda::getCurrentCUDAStream(device).stream();
  for (int l = 0; l < x.n_launches; ++l) {
    const Launch& launch = x.launches[l];
    auto [fn, var] = chosen[size_t(l)];
    std::vector<void*> args;
    for (uint64_t& v : values[size_t(l)]) args.push_back(&v);
    CUresult r = d.LaunchKernel(fn, launch.grid[0], launch.grid[1], launch.grid[2], var->block[0], var->block[1],
                                var->block[2], var->shared_bytes, stream, args.data(), nullptr);
    TORCH_CHECK(r == CUDA_SUCCESS, "autokernel export: launching the ", x.kernel_type, " kernel failed: ", d.error(r));
  }
  return true;
}

// Entry e's kernel on these inputs (e from find(), -1 for none) if it can run, else `fallback`.
template <typename F>
at::Tensor dispatch_entry(int e, const std::vector<at::Tensor>& inputs, F fallback) {
  if (e >= 0) {
    at::Tensor out;
    if (run(e, inputs, out)) {
      tuned_counts()[size_t(e)]++;
      return out;
    }
  }
  g_fallbacks++;
  // Contiguous, as a tuned kernel's output is and as the fake implementations say (some of
  // PyTorch's ops return other strides: the memory-efficient attention a transposed tensor).
  return fallback().contiguous();
}

// The tuned kernel of `kernel_type` (nullptr: none) for these inputs if there is one, else `fallback`.
template <typename F>
at::Tensor dispatch(const char* kernel_type, const std::vector<at::Tensor>& inputs, F fallback) {
  return dispatch_entry(kernel_type ? find(kernel_type, inputs) : -1, inputs, fallback);
}

at::Tensor softmax(const at::Tensor& x) {
  return dispatch("softmax", {x}, [&] { return at::softmax(x, 1); });
}
at::Tensor reduce(const at::Tensor& x) {
  return dispatch("reduce", {x}, [&] { return at::sum(x, {1}); });
}
at::Tensor reduce_max(const at::Tensor& x) {
  return dispatch("reduce_max", {x}, [&] { return at::amax(x, {1}); });
}
// The norm kernel type computing with eps (entries.h: kLayerNorms, kRmsNorms), or nullptr; an eps
// within 1e-3 of a type's, as classify.norm_type matches them.
const char* norm_type(const NormType* types, int n, double eps) {
  for (int i = 0; i < n; ++i)
    if (std::abs(eps - types[i].eps) <= 1e-3 * types[i].eps) return types[i].kernel_type;
  return nullptr;
}

at::Tensor layernorm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) {
  return dispatch(norm_type(kLayerNorms, kNumLayerNorms, eps), {x, w, b},
                  [&] { return at::layer_norm(x, {x.size(1)}, w, b, eps); });
}
at::Tensor rmsnorm(const at::Tensor& x, const at::Tensor& w, double eps) {
  return dispatch(norm_type(kRmsNorms, kNumRmsNorms, eps), {x, w},
                  [&] { return at::rms_norm(x, {x.size(1)}, w, eps); });
}
at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& target) {
  const auto fallback = [&] { return at::cross_entropy_loss(logits, target, {}, at::Reduction::None); };
  const int e = find("cross_entropy", {logits, target});
  if (e < 0) return dispatch_entry(-1, {logits, target}, fallback);
  // The kernel reads the target's logit: every target is clamped into [0, classes) first (no host
  // sync; the clamped copy has the target's size, dtype and device, so entry e takes it too), and
  // the rows whose target was not a class are set afterwards.
  const at::Tensor safe = target.clamp(0, logits.size(1) - 1);
  at::Tensor out = dispatch_entry(e, {logits, safe}, fallback);
  out.masked_fill_(target == -100, 0);
  out.masked_fill_((target != safe).logical_and(target != -100), std::numeric_limits<double>::quiet_NaN());
  return out;
}
at::Tensor matmul(const at::Tensor& a, const at::Tensor& b) {
  return dispatch("matmul", {a, b}, [&] { return at::mm(a, b); });
}
at::Tensor flash_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return dispatch("flash_attention", {q, k, v}, [&] { return at::scaled_dot_product_attention(q, k, v); });
}
at::Tensor flash_attention_causal(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return dispatch("flash_attention_causal", {q, k, v},
                  [&] { return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true); });
}
at::Tensor fused_mlp(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up, const at::Tensor& w_down) {
  return dispatch("fused_mlp", {x, w_gate, w_up, w_down},
                  [&] { return at::mm(at::silu(at::mm(x, w_gate)) * at::mm(x, w_up), w_down); });
}
at::Tensor rotary_embedding(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  return dispatch("rotary_embedding", {x, cos, sin}, [&] {
    const int64_t h = x.size(2) / 2;
    const at::Tensor c = at::cat({cos, cos}, 1).unsqueeze(1);
    const at::Tensor s = at::cat({sin, sin}, 1).unsqueeze(1);
    const at::Tensor rotated = at::cat({-x.narrow(2, h, h), x.narrow(2, 0, h)}, 2);
    return x * c + rotated * s;
  });
}

std::vector<int64_t> tuned_calls() {
  std::vector<int64_t> out;
  for (auto& c : tuned_counts()) out.push_back(c.load());
  return out;
}
int64_t fallback_calls() { return g_fallbacks.load(); }

// The operators' Autograd kernel. With an input that needs gradients (while grad mode is on), the
// operator's own function, which then runs PyTorch's op (the tuned kernels have no backward
// formula), so autograd records that op; torch.compile then traces PyTorch's ops too (and counts
// a fallback per trace). Otherwise, as in inference (no_grad, inference_mode, weights without
// gradients), the operator is called again below autograd: its kernel runs, or, while
// torch.compile traces, the fake implementation of the package's __init__.py, so the traced graph
// holds the operator itself and the tuned kernel runs in the compiled model.
bool needs_grad(const at::Tensor& t) { return t.requires_grad(); }
bool needs_grad(double) { return false; }

#define AKX_STR2(x) #x
#define AKX_STR(x) AKX_STR2(x)

template <auto Fn, const char* Name>
struct Autograd;
template <typename... A, at::Tensor (*Fn)(A...), const char* Name>
struct Autograd<Fn, Name> {
  static at::Tensor kernel(A... a) {
    if (at::GradMode::is_enabled() && (needs_grad(a) || ...)) return Fn(a...);
    static const std::string qualified = AKX_STR(AKX_NAMESPACE) "::" + std::string(Name);
    static const auto op =
        c10::Dispatcher::singleton().findSchemaOrThrow(qualified.c_str(), "").template typed<at::Tensor(A...)>();
    at::AutoDispatchBelowADInplaceOrView below;
    return op.call(a...);
  }
};

// Every tensor operator, as X(name): its function is akx::name, its name string akx::k_name.
// clang-format off
#define AKX_EACH_OPERATOR(X) \
  X(softmax) X(reduce) X(reduce_max) X(layernorm) X(rmsnorm) X(cross_entropy) X(matmul) \
  X(flash_attention) X(flash_attention_causal) X(fused_mlp) X(rotary_embedding)
// clang-format on
#define AKX_NAME(op) constexpr char k_##op[] = #op;
AKX_EACH_OPERATOR(AKX_NAME)
#undef AKX_NAME

}  // namespace
}  // namespace akx

// TORCH_LIBRARY pastes its namespace argument, so the package's namespace (registration.h) goes
// through one more macro to be expanded first.
#define AKX_TORCH_LIBRARY(ns, m) TORCH_LIBRARY(ns, m)
#define AKX_TORCH_LIBRARY_IMPL(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)
AKX_TORCH_LIBRARY(AKX_NAMESPACE, m) {
  m.def("softmax(Tensor x) -> Tensor");
  m.def("reduce(Tensor x) -> Tensor");
  m.def("reduce_max(Tensor x) -> Tensor");
  m.def("layernorm(Tensor x, Tensor weight, Tensor bias, float eps=1e-05) -> Tensor");
  m.def("rmsnorm(Tensor x, Tensor weight, float eps=1e-06) -> Tensor");
  m.def("cross_entropy(Tensor logits, Tensor target) -> Tensor");
  m.def("matmul(Tensor a, Tensor b) -> Tensor");
  m.def("flash_attention(Tensor q, Tensor k, Tensor v) -> Tensor");
  m.def("flash_attention_causal(Tensor q, Tensor k, Tensor v) -> Tensor");
  m.def("fused_mlp(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down) -> Tensor");
  m.def("rotary_embedding(Tensor x, Tensor cos, Tensor sin) -> Tensor");
  m.def("tuned_calls() -> int[]", &akx::tuned_calls);
  m.def("fallback_calls() -> int", &akx::fallback_calls);
}
// Every device (find() takes CUDA inputs only; elsewhere PyTorch's op runs). The fake
// implementations registered by the package's __init__.py take the meta device.
// clang-format off
#define AKX_IMPL(op) m.impl(#op, &akx::op);
AKX_TORCH_LIBRARY_IMPL(AKX_NAMESPACE, CompositeExplicitAutograd, m) { AKX_EACH_OPERATOR(AKX_IMPL) }
#undef AKX_IMPL
#define AKX_IMPL_AUTOGRAD(op) m.impl(#op, &akx::Autograd<&akx::op, akx::k_##op>::kernel);
AKX_TORCH_LIBRARY_IMPL(AKX_NAMESPACE, Autograd, m) { AKX_EACH_OPERATOR(AKX_IMPL_AUTOGRAD) }
#undef AKX_IMPL_AUTOGRAD
// clang-format on
