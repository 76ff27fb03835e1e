#include "worker/sandbox/candidate.h"

#include <ATen/ATen.h>
#include <dlfcn.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "kernels/reference.h"

namespace ak::sandbox {
namespace {

namespace fs = std::filesystem;

class CpuCandidate final : public Candidate {
 public:
  CpuCandidate(void* handle, void* entry, const kernels::TorchHarness* th, DType dtype)
      : handle_(handle), entry_(entry), th_(th), dtype_(dtype) {}
  ~CpuCandidate() override { dlclose(handle_); }
  void launch(const std::vector<at::Tensor>& inputs, at::Tensor& out, const std::vector<int64_t>&) override {
    int rc = th_->call_cpu(entry_, inputs, out, dtype_);
    if (rc != 0) fail("", "candidate returned error code " + std::to_string(rc) + " (0 = success)");
  }

 private:
  void* handle_;
  void* entry_;
  const kernels::TorchHarness* th_;
  DType dtype_;
};

// grant_dynamic_shared (worker/cuda_driver.h) for a launch described by `what`.
void grant_shared(const CudaDriver& drv, CUfunction fn, unsigned bytes, int max_shared, unsigned& granted,
                  const std::string& what) {
  if (Status s = grant_dynamic_shared(drv, fn, bytes, max_shared, granted); !s.ok())
    fail("", s.message() + "; " + what);
}

// The geometry and parameters of phase `phase` of a cuda call (kernels/registry.h, cuda_phases):
// the harness's parameters, then the workspace (when the type has one) and the phase (when it has
// several). One definition for the sandbox's launches and for launch_plan's.
kernels::LaunchGeometry cuda_phase_geometry(const kernels::KernelSpec& spec,
                                            const std::map<std::string, int64_t>& config,
                                            const std::vector<int64_t>& shape, DType dtype, int phases, int phase) {
  return phases > 1 ? spec.cuda_phase_geometry(config, shape, dtype, phase) : spec.cuda_geometry(config, shape, dtype);
}
void cuda_phase_params(const kernels::KernelSpec& spec, const kernels::TorchHarness& th,
                       const std::vector<at::Tensor>& inputs, at::Tensor& out, const void* workspace, int phases,
                       int phase, kernels::KernelParams& params) {
  th.cuda_params(inputs, out, params);
  if (spec.workspace_bytes) params.add_pointer(workspace);
  if (phases > 1) params.add_i64(phase);
}

// The TMA tensor maps of a cuda candidate (kernels/registry.h, TensorMapSpec): slots of the
// module's kTensorMapSymbol filled round-robin, one for each new key (the tensors' addresses and
// the shape, or for a multi-phase type each phase's key dims). The kernel checks the key, so a
// slot that was never written, or one whose tensors broke TMA's rules and were left out, only
// costs it the fast path, never a wrong result.
//
// A call on a stream that a CUDA graph is capturing (only with a writer, CudaDevice::map_writer)
// writes its slots every time, into the last slots, reserved for captures from then on: the graph
// replays the writes before the kernels that read them, so a replay finds its maps whatever eager
// calls wrote meanwhile, and those go round-robin over the other slots. Slots with one key hold
// the same maps, so a kernel may take any of them. One stream at a time (models/plug/ops.cc).
class TensorMaps {
 public:
  // Off unless `wanted`, the type has maps for this configuration (at a shape of the type's
  // defaults), the driver can encode them and the module defines the symbol; a symbol too small
  // for the slots fails at "load". writer: CudaDevice::map_writer.
  TensorMaps(const CudaDriver& drv, CUmodule mod, const kernels::KernelSpec& spec,
             const std::map<std::string, int64_t>& config, DType dtype, bool wanted, CUfunction writer)
      : drv_(drv), spec_(spec), config_(config), dtype_(dtype), writer_(writer) {
    if (!wanted || !drv.cuTensorMapEncodeTiled) return;
    if (spec.cuda_phases > 1 ? !spec.cuda_phase_tensor_maps : !spec.cuda_tensor_maps) return;
    const auto& shapes = spec.backends.at(Backend::kCuda).default_shapes;
    if (shapes.empty()) return;
    for (const auto& g : groups(shapes.front())) maps_ = std::max(maps_, g.maps.size());
    if (maps_ == 0) return;
    size_t bytes = 0;
    if (drv.cuModuleGetGlobal(&base_, &bytes, mod, kernels::kTensorMapSymbol) != CUDA_SUCCESS) {
      maps_ = 0;  // a source that reads no tensor maps
      return;
    }
    slot_bytes_ = kernels::tensor_map_slot_bytes(maps_);
    if (bytes < kernels::kTensorMapSlots * slot_bytes_ || base_ % 64 != 0)
      fail("load", std::string("the module's ") + kernels::kTensorMapSymbol + " holds " + std::to_string(bytes) +
                       " bytes; " + std::to_string(kernels::kTensorMapSlots) + " slots of " + std::to_string(maps_) +
                       " tensor maps need " + std::to_string(kernels::kTensorMapSlots * slot_bytes_) +
                       ", 64-byte aligned");
  }

  // Makes sure a slot holds the maps of this call (of each of its phases), writing them on
  // `stream` where none does. workspace: the call's (multi-phase types with one), else undefined.
  void prepare(const std::vector<at::Tensor>& inputs, const at::Tensor& out, const at::Tensor& workspace,
               const std::vector<int64_t>& shape, CUstream stream) {
    if (maps_ == 0) return;
    if (shape != groups_shape_) {
      groups_ = groups(shape);
      groups_shape_ = shape;
    }
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    if (drv_.cuStreamIsCapturing && drv_.cuStreamIsCapturing(stream, &capture) != CUDA_SUCCESS)
      capture = CU_STREAM_CAPTURE_STATUS_NONE;
    if (capture == CU_STREAM_CAPTURE_STATUS_NONE) {
      for (const auto& g : groups_) prepare_group(g, inputs, out, workspace, stream, -1);
      return;
    }
    // A host copy cannot be captured, nor can more groups than the reserve: the kernels run without maps.
    if (!writer_ || groups_.size() > size_t(kernels::kTensorMapSlots / 2)) return;
    reserve_capture_slots(groups_.size());
    for (size_t i = 0; i < groups_.size(); ++i)
      prepare_group(groups_[i], inputs, out, workspace, stream, kernels::kTensorMapSlots - int(groups_.size() - i));
  }

 private:
  // The maps of each launch of a call: one group, or one a phase.
  std::vector<kernels::PhaseTensorMaps> groups(const std::vector<int64_t>& shape) const {
    return kernels::tensor_map_groups(spec_, config_, shape, dtype_);
  }

  // The last n slots (n at most half of them) are for captured calls from now on: their keys are
  // forgotten, and eager calls take the others.
  void reserve_capture_slots(size_t n) {
    if (n <= captured_) return;
    captured_ = n;
    for (size_t s = kernels::kTensorMapSlots - n; s < keys_.size(); ++s) keys_[s] = {};
    next_ %= eager_slots();
  }
  int eager_slots() const { return kernels::kTensorMapSlots - int(captured_); }

  // slot: where a captured call's group goes (written every time), or -1: an eager call's, written
  // round-robin unless a slot holds its key.
  void prepare_group(const kernels::PhaseTensorMaps& g, const std::vector<at::Tensor>& inputs, const at::Tensor& out,
                     const at::Tensor& workspace, CUstream stream, int slot) {
    if (g.maps.size() != maps_ || maps_ + g.key.size() > 8) return;
    std::array<uint64_t, 8> key{};
    for (size_t i = 0; i < maps_; ++i) key[i] = address(operand(inputs, out, workspace, g.maps[i]), g.maps[i]);
    for (size_t d = 0; d < g.key.size(); ++d) key[maps_ + d] = uint64_t(g.key[d]);
    if (slot < 0)
      for (int s = 0; s < eager_slots(); ++s)
        if (keys_[size_t(s)] == key) return;
    for (const auto& k : without_)
      if (k == key) return;
    std::vector<unsigned char> image(slot_bytes_, 0);
    for (size_t i = 0; i < maps_; ++i)
      if (!encode(operand(inputs, out, workspace, g.maps[i]), g.maps[i], image.data() + 128 * i)) {
        // Remembered, so that later calls on these tensors skip the encoding.
        without_[next_without_] = key;
        next_without_ = (next_without_ + 1) % without_.size();
        return;
      }
    std::memcpy(image.data() + 128 * maps_, key.data(), sizeof key);
    if (slot < 0) {
      slot = next_;
      next_ = (next_ + 1) % eager_slots();
      keys_[size_t(slot)] = key;
    }
    write(slot, image, stream);
  }

  void write(int slot, const std::vector<unsigned char>& image, CUstream stream) {
    const CUdeviceptr dst = base_ + CUdeviceptr(slot) * slot_bytes_;
    CUresult r;
    if (writer_) {
      // The image by value: the launch (or the graph node that captures it) keeps its own copy.
      std::array<unsigned char, kernels::tensor_map_slot_bytes(8)> param{};
      std::memcpy(param.data(), image.data(), image.size());
      unsigned words = unsigned(image.size() / 8);
      CUdeviceptr to = dst;
      void* args[] = {param.data(), &to, &words};
      r = drv_.cuLaunchKernel(writer_, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr);
    } else {
      // From pageable memory: the call returns once `image` is staged, so it may go out of scope.
      r = drv_.cuMemcpyHtoDAsync(dst, image.data(), image.size(), stream);
    }
    if (r != CUDA_SUCCESS) fail("", "cannot write the tensor maps to the device: " + drv_.error_text(r));
  }

  static const at::Tensor& operand(const std::vector<at::Tensor>& inputs, const at::Tensor& out,
                                   const at::Tensor& workspace, const kernels::TensorMapSpec& m) {
    if (m.operand == -1) return out;
    if (m.operand == -2) {
      if (!workspace.defined()) fail("", "tensor map of the workspace: the kernel type has none");
      return workspace;
    }
    if (m.operand < 0 || size_t(m.operand) >= inputs.size())
      fail("", "tensor map of input " + std::to_string(m.operand) + ": the call has " + std::to_string(inputs.size()));
    return inputs[size_t(m.operand)];
  }

  uint64_t address(const at::Tensor& t, const kernels::TensorMapSpec& m) const {
    return uint64_t(t.data_ptr()) + m.offset * uint64_t(dtype_bytes(dtype_));
  }

  // Encodes one map into `dst`; false when the tensor breaks TMA's rules (the kernel then runs
  // without it). A map the spec describes wrongly fails the call: an input's or the output's must
  // cover the whole tensor, the workspace's (a byte tensor, elements of the dtype) fit in it.
  bool encode(const at::Tensor& t, const kernels::TensorMapSpec& m, unsigned char* dst) const {
    const size_t rank = m.dims.size();
    if (rank < 1 || rank > 5 || m.box.size() != rank)
      fail("", "tensor map with " + std::to_string(rank) + " dims and " + std::to_string(m.box.size()) +
                   " box dims (1 to 5, equal)");
    const uint64_t esize = uint64_t(dtype_bytes(dtype_));
    uint64_t numel = 1;
    for (uint64_t d : m.dims) numel *= d;
    if (!t.is_contiguous()) fail("", "tensor map of a tensor that is not contiguous");
    if (m.operand == -2) {
      if (m.offset + numel > uint64_t(t.numel()) * uint64_t(t.element_size()) / esize)
        fail("", "tensor map past the workspace's end: " + std::to_string(m.offset + numel) + " elements");
    } else if (m.offset != 0 || numel != uint64_t(t.numel()) || uint64_t(t.element_size()) != esize) {
      fail("", "tensor map dims do not cover a contiguous tensor of " + std::to_string(t.numel()) + " elements");
    }
    const uint64_t addr = address(t, m);
    if (addr % 16 != 0) return false;
    uint64_t strides[5];
    uint64_t stride = esize;
    for (size_t d = 0; d < rank; ++d) {
      if (m.dims[d] >= (uint64_t{1} << 31)) return false;
      stride *= m.dims[d];
      if (d + 1 < rank) {
        if (stride % 16 != 0) return false;
        strides[d] = stride;
      }
    }
    const uint32_t ones[5] = {1, 1, 1, 1, 1};
    const int dtype = dtype_ == DType::kF32 ? 7 : dtype_ == DType::kF16 ? 6 : 9;  // FLOAT32, FLOAT16, BFLOAT16
    const int swizzle = m.swizzle_bytes == 128 ? 3 : m.swizzle_bytes == 64 ? 2 : m.swizzle_bytes == 32 ? 1 : 0;
    // L2 promotion 256 B (3), out-of-bounds elements read as zero (fill 0), no interleave (0).
    const CUresult r = drv_.cuTensorMapEncodeTiled(dst, dtype, unsigned(rank), reinterpret_cast<void*>(addr),
                                                   m.dims.data(), strides, m.box.data(), ones, 0, swizzle, 3, 0);
    if (r != CUDA_SUCCESS) fail("", "cuTensorMapEncodeTiled failed: " + drv_.error_text(r));
    return true;
  }

  const CudaDriver& drv_;
  const kernels::KernelSpec& spec_;
  std::map<std::string, int64_t> config_;
  DType dtype_;
  size_t maps_ = 0;  // maps a slot holds; 0: off
  size_t slot_bytes_ = 0;
  CUdeviceptr base_ = 0;
  CUfunction writer_ = nullptr;
  std::array<std::array<uint64_t, 8>, kernels::kTensorMapSlots> keys_{};  // an eager slot's key; zero: none
  size_t captured_ = 0;                                                   // the last slots, reserved for captured calls
  int next_ = 0;
  std::array<std::array<uint64_t, 8>, 4> without_{};  // recent keys whose tensors TMA cannot describe
  size_t next_without_ = 0;
  std::vector<int64_t> groups_shape_;
  std::vector<kernels::PhaseTensorMaps> groups_;
};

class CudaCandidate final : public Candidate {
 public:
  CudaCandidate(const CudaDriver& drv, CUmodule mod, CUfunction fn, const kernels::KernelSpec& spec,
                std::map<std::string, int64_t> config, DType dtype, int max_threads, int max_shared,
                const kernels::TorchHarness* th, std::unique_ptr<TensorMaps> maps)
      : drv_(drv),
        mod_(mod),
        fn_(fn),
        spec_(spec),
        config_(std::move(config)),
        dtype_(dtype),
        max_threads_(max_threads),
        max_shared_(max_shared),
        th_(th),
        maps_(std::move(maps)) {}
  ~CudaCandidate() override { drv_.cuModuleUnload(mod_); }
  void set_stream(void* stream) override { stream_ = static_cast<CUstream>(stream); }
  void prepare(const std::vector<at::Tensor>& inputs, const at::Tensor& out,
               const std::vector<int64_t>& shape) override {
    grow_workspace(inputs, shape);
    maps_->prepare(inputs, out, workspace_, shape, stream_);
  }

  void launch(const std::vector<at::Tensor>& inputs, at::Tensor& out, const std::vector<int64_t>& shape) override {
    // The harness, not the candidate, decides the launch: geometry from the kernel type's
    // spec, on the harness's stream, within the device's limits. A multi-phase type
    // (kernels/registry.h, cuda_phases) is that many launches with the workspace and the phase
    // after its parameters.
    grow_workspace(inputs, shape);
    maps_->prepare(inputs, out, workspace_, shape, stream_);  // eager: nothing to do when prepare() ran
    const void* workspace = spec_.workspace_bytes ? workspace_.data_ptr() : nullptr;
    const int phases = std::max(1, spec_.cuda_phases);
    for (int phase = 0; phase < phases; ++phase) launch_phase(inputs, out, shape, workspace, phases, phase);
  }

 private:
  // The type's workspace for a call of `shape`, grown when it is too small (kept across calls:
  // its address, in the tensor maps' keys, stays the same).
  void grow_workspace(const std::vector<at::Tensor>& inputs, const std::vector<int64_t>& shape) {
    if (!spec_.workspace_bytes) return;
    const int64_t bytes = spec_.workspace_bytes(shape, dtype_);
    if (bytes > workspace_.numel()) {
      workspace_ = at::Tensor();  // release the old one first
      workspace_ = at::empty({bytes}, inputs.at(0).options().dtype(at::kByte));
      workspace_.fill_(0xFF);  // NaN in every float format: reading before writing shows
    }
  }

  void launch_phase(const std::vector<at::Tensor>& inputs, at::Tensor& out, const std::vector<int64_t>& shape,
                    const void* workspace, int phases, int phase) {
    const kernels::LaunchGeometry g = cuda_phase_geometry(spec_, config_, shape, dtype_, phases, phase);
    const int64_t threads = int64_t(g.block[0]) * g.block[1] * g.block[2];
    const std::string what = "grid " + std::to_string(g.grid[0]) + "x" + std::to_string(g.grid[1]) + "x" +
                             std::to_string(g.grid[2]) + ", block " + std::to_string(g.block[0]) + "x" +
                             std::to_string(g.block[1]) + "x" + std::to_string(g.block[2]) + ", " +
                             std::to_string(g.shared_bytes) + " B dynamic shared memory";
    if (max_threads_ > 0 && threads > max_threads_)
      fail("", "the kernel can run at most " + std::to_string(max_threads_) +
                   " threads per block (registers); the launch asks for " + what);
    grant_shared(drv_, fn_, g.shared_bytes, max_shared_, granted_shared_, what);
    kernels::KernelParams params;
    cuda_phase_params(spec_, *th_, inputs, out, workspace, phases, phase, params);
    CUresult r = drv_.cuLaunchKernel(fn_, g.grid[0], g.grid[1], g.grid[2], g.block[0], g.block[1], g.block[2],
                                     g.shared_bytes, stream_, params.args(), nullptr);
    if (r != CUDA_SUCCESS)
      fail("", "cuLaunchKernel failed (" + (phases > 1 ? "phase " + std::to_string(phase) + ", " : std::string()) +
                   what + "): " + drv_.error_text(r));
  }

  const CudaDriver& drv_;
  CUmodule mod_;
  CUfunction fn_;
  const kernels::KernelSpec& spec_;
  std::map<std::string, int64_t> config_;
  DType dtype_;
  int max_threads_;
  int max_shared_;
  unsigned granted_shared_ = 0;  // the dynamic limit set so far (grant_dynamic_shared)
  const kernels::TorchHarness* th_;
  std::unique_ptr<TensorMaps> maps_;
  at::Tensor workspace_;  // grown to the largest shape's spec_.workspace_bytes, kept across calls
  CUstream stream_ = nullptr;
};

// A Triton kernel compiled by worker/triton/compile.py: one or two builds (generic, and one that
// assumes the kernel type's divisible parameters 16-divisible), each with the block size and
// dynamic shared memory of its metadata. The grid comes from the kernel type's spec; the
// parameters are the cuda backend's, followed by Triton's hidden scratch pointers (null: the
// kernels the farm runs need no scratch memory, which load() checks).
class TritonCandidate final : public Candidate {
 public:
  struct Build {
    CUmodule mod = nullptr;
    CUfunction fn = nullptr;
    unsigned block = 0;
    unsigned shared_bytes = 0;
    size_t params = 0;              // runtime parameters, before the hidden ones
    size_t hidden = 0;              // trailing scratch pointers
    std::vector<size_t> divisible;  // indices of the parameters this build assumes 16-divisible
    unsigned granted_shared = 0;
  };
  TritonCandidate(const CudaDriver& drv, std::vector<Build> builds, const kernels::KernelSpec& spec,
                  std::map<std::string, int64_t> config, DType dtype, int max_shared, const kernels::TorchHarness* th)
      : drv_(drv),
        builds_(std::move(builds)),
        spec_(spec),
        config_(std::move(config)),
        dtype_(dtype),
        max_shared_(max_shared),
        th_(th) {}
  ~TritonCandidate() override {
    for (Build& b : builds_) drv_.cuModuleUnload(b.mod);
  }
  void set_stream(void* stream) override { stream_ = static_cast<CUstream>(stream); }

  void launch(const std::vector<at::Tensor>& inputs, at::Tensor& out, const std::vector<int64_t>& shape) override {
    kernels::KernelParams params;
    th_->cuda_params(inputs, out, params);
    // The most specialised build whose assumptions hold for these values.
    Build* b = &builds_.front();
    for (Build& cand : builds_) {
      bool ok = !cand.divisible.empty();
      for (size_t i : cand.divisible) ok = ok && i < params.size() && params.value(i) % 16 == 0;
      if (ok) b = &cand;
    }
    if (params.size() != b->params)
      fail("", "the Triton kernel takes " + std::to_string(b->params) + " runtime parameters; kernel type '" +
                   spec_.name + "' passes " + std::to_string(params.size()) + " (see its triton signature)");
    for (size_t i = 0; i < b->hidden; ++i) params.add_pointer(nullptr);
    kernels::LaunchGeometry g = spec_.triton_grid(config_, shape, dtype_);
    const std::string what = "grid " + std::to_string(g.grid[0]) + "x" + std::to_string(g.grid[1]) + "x" +
                             std::to_string(g.grid[2]) + ", block " + std::to_string(b->block) + ", " +
                             std::to_string(b->shared_bytes) + " B dynamic shared memory";
    grant_shared(drv_, b->fn, b->shared_bytes, max_shared_, b->granted_shared, what);
    CUresult r = drv_.cuLaunchKernel(b->fn, g.grid[0], g.grid[1], g.grid[2], b->block, 1, 1, b->shared_bytes, stream_,
                                     params.args(), nullptr);
    if (r != CUDA_SUCCESS) fail("", "cuLaunchKernel failed (" + what + "): " + drv_.error_text(r));
  }

 private:
  const CudaDriver& drv_;
  std::vector<Build> builds_;
  const kernels::KernelSpec& spec_;
  std::map<std::string, int64_t> config_;
  DType dtype_;
  int max_shared_;
  const kernels::TorchHarness* th_;
  CUstream stream_ = nullptr;
};

// What worker/triton/compile.py's metadata (<stem>.json) says of one build: its kernel's name,
// block size and dynamic shared memory, its runtime parameters (pointers and scalars, all 8 bytes),
// the hidden scratch pointers after them, and which parameters it assumes 16-divisible. Fails at
// "load" when the metadata is unreadable, lacks a field or asks for what the harness does not give
// (global scratch memory, a cluster or cooperative launch); nullopt when the file is missing and
// not `required`.
struct TritonMeta {
  std::string function;
  unsigned block = 0;
  unsigned shared_bytes = 0;
  size_t params = 0;
  size_t hidden = 0;
  std::vector<size_t> divisible;
};

std::optional<TritonMeta> read_triton_meta(const std::string& path, bool required) {
  std::ifstream meta_in(path);
  if (!meta_in) {
    if (required) fail("load", "a triton artefact has no metadata " + path);
    return std::nullopt;
  }
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(meta_in);
  } catch (const std::exception& e) {
    fail("load", "unreadable triton metadata " + path + ": " + e.what());
  }
  TritonMeta m;
  try {
    if (meta.value("global_scratch_bytes", 0) != 0 || meta.value("profile_scratch_bytes", 0) != 0)
      fail("load", "the Triton kernel needs global scratch memory, which the harness does not provide");
    if (meta.value("num_ctas", 1) != 1 || meta.value("launch_cooperative_grid", false))
      fail("load", "the Triton kernel needs a cluster or cooperative launch, which the harness does not do");
    m.function = meta.at("name").get<std::string>();
    m.block = meta.at("block").at(0).get<unsigned>();
    m.shared_bytes = meta.at("shared_bytes").get<unsigned>();
    std::vector<std::string> div = meta.value("divisible_by_16", std::vector<std::string>{});
    for (const auto& prm : meta.at("params")) {
      const std::string kind = prm.at("kind");
      if (kind == "pointer" || kind == "scalar") {
        if (prm.at("bytes").get<int>() != 8 && kind == "pointer")
          fail("load", "the Triton kernel's pointer " + prm.at("name").get<std::string>() + " is not 8 bytes");
        if (std::find(div.begin(), div.end(), prm.at("name").get<std::string>()) != div.end())
          m.divisible.push_back(m.params);
        ++m.params;
      } else {
        ++m.hidden;
      }
    }
  } catch (const nlohmann::json::exception& e) {
    fail("load", "triton metadata " + path + " lacks a field: " + e.what());
  }
  return m;
}

// The bytes of a cubin artefact; fails at "load" when it cannot be read or is no ELF image.
std::string read_cubin(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("load", "cannot read artefact " + path);
  std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (image.size() < 4 || image.compare(0, 4, "\177ELF") != 0)  // the ELF magic, 0x7f 'E' 'L' 'F'
    fail("load", "artefact " + path + " is not a cubin (no ELF header)");
  return image;
}

CUresult load_module(const CudaDriver& drv, const std::string& cubin, const std::string& name,
                     TritonCandidate::Build& b) {
  const std::string image = read_cubin(cubin);
  CUresult r = drv.cuModuleLoadData(&b.mod, image.data());
  if (r != CUDA_SUCCESS) return r;
  r = drv.cuModuleGetFunction(&b.fn, b.mod, name.c_str());
  if (r != CUDA_SUCCESS) {
    drv.cuModuleUnload(b.mod);
    b.mod = nullptr;
  }
  return r;
}

}  // namespace

std::unique_ptr<Candidate> load_cpu_candidate(const std::string& artifact_path, const std::string& entry,
                                              const std::string& kernel_type, DType dtype) {
  // dlopen a private copy: the same path loaded twice would return the first (cached) handle,
  // and RTLD_LOCAL keeps the candidate's symbols out of everyone else's way.
  std::string tmpl = (fs::temp_directory_path() / "ak-candidate-XXXXXX.so").string();
  int fd = mkstemps(tmpl.data(), 3);
  if (fd < 0) fail("load", std::string("cannot create a temp file: ") + std::strerror(errno));
  close(fd);
  std::error_code ec;
  fs::copy_file(artifact_path, tmpl, fs::copy_options::overwrite_existing, ec);
  if (ec) {
    fs::remove(tmpl);
    fail("load", "cannot read artefact " + artifact_path + ": " + ec.message());
  }
  void* h = dlopen(tmpl.c_str(), RTLD_NOW | RTLD_LOCAL);
  fs::remove(tmpl, ec);  // the mapping stays valid
  if (!h) fail("load", std::string("dlopen failed: ") + dlerror());
  void* sym = dlsym(h, entry.c_str());
  if (!sym) {
    dlclose(h);
    fail("load",
         "artefact " + artifact_path + " has no symbol '" + entry + "'; the candidate must define it extern \"C\"");
  }
  return std::make_unique<CpuCandidate>(h, sym, kernels::find_harness(kernel_type), dtype);
}

std::string tensor_map_writer_ptx() {
  // One thread stores the image's words with immediate offsets (a parameter array has no
  // register-indexed load), stopping after `words`; then the release that a kernel reading the
  // maps through the tensor-map proxy acquires (kernels/common/tma.cuh, tma_map_acquire).
  constexpr size_t kWords = kernels::tensor_map_slot_bytes(8) / 8;
  std::string p = ".version 8.3\n.target sm_90\n.address_size 64\n\n.visible .entry " +
                  std::string(kTensorMapWriterEntry) + "(\n    .param .align 8 .b8 image[" +
                  std::to_string(kWords * 8) +
                  "],\n    .param .u64 dst,\n    .param .u32 words)\n{\n    .reg .pred %ak_p;\n    .reg .b32 %ak_n;\n"
                  "    .reg .b64 %ak_d, %ak_w;\n    ld.param.u64 %ak_d, [dst];\n    cvta.to.global.u64 %ak_d, %ak_d;\n"
                  "    ld.param.u32 %ak_n, [words];\n";
  for (size_t k = 0; k < kWords; ++k) {
    const std::string off = std::to_string(8 * k);
    p += "    setp.le.u32 %ak_p, %ak_n, " + std::to_string(k) +
         ";\n    @%ak_p bra DONE;\n    ld.param.u64 %ak_w, [image+" + off + "];\n    st.global.u64 [%ak_d+" + off +
         "], %ak_w;\n";
  }
  return p + "DONE:\n    fence.proxy.tensormap::generic.release.gpu;\n    ret;\n}\n";
}

CUfunction load_tensor_map_writer(const CudaDriver& drv) {
  // Once per context: the module stays loaded for the process's life, as the torch library's
  // kernels do.
  static std::map<CUcontext, CUfunction> loaded;
  CUcontext ctx = nullptr;
  if (drv.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) fail("load", "no current CUDA context for the map writer");
  if (auto it = loaded.find(ctx); it != loaded.end()) return it->second;
  const std::string ptx = tensor_map_writer_ptx();
  CUmodule mod = nullptr;
  CUresult r = drv.cuModuleLoadData(&mod, ptx.c_str());
  if (r != CUDA_SUCCESS)
    fail("load", "the driver cannot load the tensor-map writer (PTX for sm_90): " + drv.error_text(r));
  CUfunction fn = nullptr;
  r = drv.cuModuleGetFunction(&fn, mod, kTensorMapWriterEntry);
  if (r != CUDA_SUCCESS) {
    drv.cuModuleUnload(mod);
    fail("load", "the tensor-map writer's module has no kernel: " + drv.error_text(r));
  }
  loaded[ctx] = fn;
  return fn;
}

std::unique_ptr<Candidate> load_cuda_candidate(const CudaDevice& dev, const std::string& artifact_path,
                                               const std::string& entry, const kernels::KernelSpec& spec,
                                               const std::map<std::string, int64_t>& config, DType dtype) {
  if (!spec.cuda_geometry || (spec.cuda_phases > 1 && !spec.cuda_phase_geometry))
    fail("load", "kernel type '" + spec.name + "' has no cuda launch geometry");
  const std::string image = read_cubin(artifact_path);
  CUmodule mod = nullptr;
  CUresult r = dev.drv->cuModuleLoadData(&mod, image.data());
  if (r != CUDA_SUCCESS)
    fail("load", "cuModuleLoadData failed: " + dev.drv->error_text(r) + " (was the cubin built for " + dev.arch + "?)");
  CUfunction fn = nullptr;
  r = dev.drv->cuModuleGetFunction(&fn, mod, entry.c_str());
  if (r != CUDA_SUCCESS) {
    dev.drv->cuModuleUnload(mod);
    fail("load", "the cubin has no kernel '" + entry + "' (" + dev.drv->error_text(r) +
                     "); declare it extern \"C\" __global__");
  }
  int max_threads = 0;
  dev.drv->cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn);
  std::unique_ptr<TensorMaps> maps;
  try {
    maps = std::make_unique<TensorMaps>(*dev.drv, mod, spec, config, dtype, dev.tensor_maps, dev.map_writer);
  } catch (...) {
    dev.drv->cuModuleUnload(mod);
    throw;
  }
  return std::make_unique<CudaCandidate>(*dev.drv, mod, fn, spec, config, dtype, max_threads, dev.max_shared_optin,
                                         kernels::find_harness(spec.name), std::move(maps));
}

// The cubin and its metadata (<stem>.json), and the 16-divisible build <stem>.div16.* if present.
std::unique_ptr<Candidate> load_triton_candidate(const CudaDevice& dev, const std::string& artifact_path,
                                                 const kernels::KernelSpec& spec,
                                                 const std::map<std::string, int64_t>& config, DType dtype) {
  if (!spec.triton_grid) fail("load", "kernel type '" + spec.name + "' has no triton grid");
  const std::string path = artifact_path;
  const std::string ext = ".cubin";
  if (path.size() <= ext.size() || path.compare(path.size() - ext.size(), ext.size(), ext) != 0)
    fail("load", "triton artefact " + path + " is not a .cubin");
  const std::string stem = path.substr(0, path.size() - ext.size());
  std::vector<TritonCandidate::Build> builds;
  // Unloads what was loaded if a later step fails.
  struct Guard {
    const CudaDriver& drv;
    std::vector<TritonCandidate::Build>& b;
    bool armed = true;
    ~Guard() {
      if (armed)
        for (auto& x : b) drv.cuModuleUnload(x.mod);
    }
  } guard{*dev.drv, builds};
  for (const std::string suffix : {"", ".div16"}) {
    TritonCandidate::Build b;
    const std::optional<TritonMeta> meta = read_triton_meta(stem + suffix + ".json", suffix.empty());
    if (!meta) continue;
    b.block = meta->block;
    b.shared_bytes = meta->shared_bytes;
    b.params = meta->params;
    b.hidden = meta->hidden;
    b.divisible = meta->divisible;
    CUresult r = load_module(*dev.drv, stem + suffix + ext, meta->function, b);
    if (r != CUDA_SUCCESS)
      fail("load", "cannot load the Triton kernel " + stem + suffix + ext + ": " + dev.drv->error_text(r));
    builds.push_back(b);
  }
  guard.armed = false;
  return std::make_unique<TritonCandidate>(*dev.drv, std::move(builds), spec, config, dtype, dev.max_shared_optin,
                                           kernels::find_harness(spec.name));
}

namespace {

using nlohmann::json;

json geometry_json(const unsigned (&v)[3]) { return json::array({v[0], v[1], v[2]}); }

// Stand-ins for the call's tensors at made-up addresses, one 2^44-byte window each, so that every
// pointer the harness passes names its tensor (and an offset into it). Nothing reads them.
constexpr uint64_t kWindowBits = 44;
void* fake_address(size_t slot) { return reinterpret_cast<void*>(uint64_t(slot + 1) << kWindowBits); }

json tensor_json(const at::Tensor& t) {
  return {{"sizes", t.sizes().vec()}, {"dtype", int(t.scalar_type())}, {"dtype_name", c10::toString(t.scalar_type())}};
}

// The harness's parameters as symbols: ["input", k, offset], ["output", 0, offset] or
// ["value", v, 0]. Slots: inputs 0..n-1, the output n, the workspace n + 1.
json symbolic_params(const kernels::KernelParams& params, size_t n_inputs) {
  json out = json::array();
  for (size_t i = 0; i < params.size(); ++i) {
    const uint64_t v = params.value(i);
    const uint64_t slot = (v >> kWindowBits);
    const uint64_t offset = v & ((uint64_t(1) << kWindowBits) - 1);
    if (slot >= 1 && slot <= n_inputs + 2) {
      const size_t s = size_t(slot - 1);
      const char* kind = s < n_inputs ? "input" : s == n_inputs ? "output" : "workspace";
      out.push_back(json::array({kind, s < n_inputs ? s : 0, offset}));
    } else {
      out.push_back(json::array({"value", int64_t(v), 0}));
    }
  }
  return out;
}

}  // namespace

std::string launch_plan(const std::string& backend, const std::string& artifact_path, const std::string& entry,
                        const kernels::KernelSpec& spec, const std::map<std::string, int64_t>& config, DType dtype,
                        const std::vector<int64_t>& shape) {
  const kernels::TorchHarness* th = kernels::find_harness(spec.name);
  if (!th) fail("load", "kernel type '" + spec.name + "' has no libtorch harness");
  if (std::string bad = spec.check_shape(shape); !bad.empty()) fail("load", bad);
  // The inputs the sandbox verified the kernel on, by their sizes and dtypes: made on the meta
  // device (no memory), or on the CPU where a harness needs real values.
  std::vector<at::Tensor> like;
  try {
    like = th->make_inputs(shape, dtype, c10::Device(c10::kMeta), 1);
  } catch (const c10::Error&) {
    like = th->make_inputs(shape, dtype, c10::Device(c10::kCPU), 1);
  }
  const at::Tensor out_like = th->make_output(like);
  json plan = {{"inputs", json::array()}, {"output", tensor_json(out_like)}};
  std::vector<at::Tensor> fake;
  for (size_t i = 0; i < like.size(); ++i) {
    plan["inputs"].push_back(tensor_json(like[i]));
    fake.push_back(at::from_blob(fake_address(i), like[i].sizes(),
                                 at::TensorOptions().dtype(like[i].scalar_type()).device(c10::kCPU)));
  }
  at::Tensor fake_out = at::from_blob(fake_address(like.size()), out_like.sizes(),
                                      at::TensorOptions().dtype(out_like.scalar_type()).device(c10::kCPU));
  const int64_t workspace = spec.workspace_bytes ? spec.workspace_bytes(shape, dtype) : 0;
  plan["workspace_bytes"] = workspace;
  json builds = json::array();
  json launches = json::array();
  if (backend == "cuda") {
    if (!spec.cuda_geometry || (spec.cuda_phases > 1 && !spec.cuda_phase_geometry))
      fail("load", "kernel type '" + spec.name + "' has no cuda launch geometry");
    (void)read_cubin(artifact_path);
    builds.push_back({{"cubin", artifact_path}, {"function", entry}});
    const int phases = std::max(1, spec.cuda_phases);
    for (int phase = 0; phase < phases; ++phase) {
      const kernels::LaunchGeometry g = cuda_phase_geometry(spec, config, shape, dtype, phases, phase);
      kernels::KernelParams params;
      cuda_phase_params(spec, *th, fake, fake_out, fake_address(like.size() + 1), phases, phase, params);
      launches.push_back({{"grid", geometry_json(g.grid)},
                          {"build", 0},
                          {"block", geometry_json(g.block)},
                          {"shared_bytes", g.shared_bytes},
                          {"params", symbolic_params(params, like.size())}});
    }
  } else if (backend == "triton") {
    if (!spec.triton_grid) fail("load", "kernel type '" + spec.name + "' has no triton grid");
    const std::string ext = ".cubin";
    if (artifact_path.size() <= ext.size() ||
        artifact_path.compare(artifact_path.size() - ext.size(), ext.size(), ext) != 0)
      fail("load", "triton artefact " + artifact_path + " is not a .cubin");
    const std::string stem = artifact_path.substr(0, artifact_path.size() - ext.size());
    std::vector<TritonMeta> metas;
    for (const std::string suffix : {"", ".div16"}) {
      std::optional<TritonMeta> m = read_triton_meta(stem + suffix + ".json", suffix.empty());
      if (!m) continue;
      (void)read_cubin(stem + suffix + ext);
      builds.push_back({{"cubin", stem + suffix + ext}, {"function", m->function}});
      metas.push_back(*m);
    }
    kernels::KernelParams params;
    th->cuda_params(fake, fake_out, params);
    for (const TritonMeta& m : metas) {
      if (params.size() != m.params)
        fail("load", "the Triton kernel takes " + std::to_string(m.params) + " runtime parameters; kernel type '" +
                         spec.name + "' passes " + std::to_string(params.size()) + " (see its triton signature)");
      if (m.hidden != metas.front().hidden) fail("load", "the Triton builds differ in their hidden parameters");
    }
    for (size_t i = 0; i < metas.front().hidden; ++i) params.add_pointer(nullptr);
    const kernels::LaunchGeometry g = spec.triton_grid(config, shape, dtype);
    json launch = {{"grid", geometry_json(g.grid)},
                   {"build", 0},
                   {"block", json::array({metas[0].block, 1, 1})},
                   {"shared_bytes", metas[0].shared_bytes},
                   {"params", symbolic_params(params, like.size())}};
    if (metas.size() > 1 && !metas[1].divisible.empty())
      launch["aligned"] = {{"build", 1},
                           {"block", json::array({metas[1].block, 1, 1})},
                           {"shared_bytes", metas[1].shared_bytes},
                           {"divisible", metas[1].divisible}};
    launches.push_back(launch);
  } else {
    fail("load", "a " + backend + " kernel has no launch plan (cuda and triton only)");
  }
  plan["builds"] = builds;
  plan["launches"] = launches;
  return plan.dump();
}

}  // namespace ak::sandbox
