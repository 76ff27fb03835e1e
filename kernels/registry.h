// Kernel registry: every kernel type the farm can search, as data. No libtorch here: the
// coordinator (campaign planner), the worker's compiler and the sandbox all read it. The
// libtorch reference of each type lives in kernels/<type>/reference.cc, compiled only into the
// sandbox (worker/sandbox/).
//
// Adding a kernel type touches its folder, one line each in kernels/registry.cc and
// kernels/references.cc, and its name in kernels/CMakeLists.txt.
// All functions are thread-safe (the registry is immutable after static initialisation).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/job.h"

namespace ak::kernels {

// One tunable of a search space; its values become -D<name>=<value> when compiling.
struct Tunable {
  std::string name;
  std::vector<int64_t> values;
  int64_t default_value;
};

struct BackendSource {
  std::string source;   // full source text of the starter candidate (embedded at build time)
  std::string entry;    // cpu: extern "C" symbol; cuda: __global__ kernel name
  std::vector<Tunable> space;
  // Shapes of the default campaign. The sandbox's shape sweep (stage verify.sweep) verifies
  // every candidate at each of them, whatever the job's own shape.
  std::vector<std::vector<int64_t>> default_shapes;
  // Defaults that differ by dtype (matmul's fp32 SIMT path wants more warps than its tensor-core
  // paths), over the space's own; see default_config(source, dtype).
  std::map<DType, std::map<std::string, int64_t>> dtype_defaults = {};
  // Known good variants (the type's README ladder: the fastest configurations measured so far),
  // which the studies of a model's targets try right after the default (cli/extract.cc). Partial,
  // completed with the dtype's defaults; one a dtype cannot build is left out of its studies, one
  // a GPU cannot launch (its shared memory) passed over on that GPU.
  std::vector<std::map<std::string, int64_t>> starts = {};
};

struct Tolerance {
  double atol;
  double rtol;
};

// How the sandbox launches a cuda candidate: grid and block dimensions and dynamic shared memory,
// computed from the candidate's config and the job's shape. A kernel type's cuda sources are
// compiled with -DAK_DTYPE=<DType value> (0 fp32, 1 fp16, 2 bf16) besides the config defines, so
// one entry name serves every dtype. The kernel parameters of each type are listed next to its
// spec (kernels/<type>/spec.cc) and built by its libtorch harness (kernels/<type>/reference.cc).
struct LaunchGeometry {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  // Dynamic shared memory per block [bytes]; the static part: KernelSpec::cuda_static_shared_bytes.
  unsigned shared_bytes = 0;
};

// One TMA tensor map (CUtensorMap, sm_90+) the sandbox builds for a cuda call: a tiled 2-D to 5-D
// view of one of the call's tensors in its dtype, zero-filled out of bounds. See
// KernelSpec::cuda_tensor_maps.
struct TensorMapSpec {
  int operand = 0;             // the call's input of that index; -1: its output; -2: the workspace
  std::vector<uint64_t> dims;  // elements, innermost first (row-major [R, C]: {C, R}); product = numel
  std::vector<uint32_t> box;   // the box one copy moves [elements], innermost first, each 1..256
  int swizzle_bytes = 0;       // 0 (none), 32, 64 or 128; box[0] * element size must not exceed it
  uint64_t offset = 0;         // elements from the operand's start (the workspace only)
};

// Where a cuda module finds its tensor maps: a __device__ variable of this name,
// kTensorMapSlots slots of tensor_map_slot_bytes(n) each (64-byte aligned). Slot layout: the n
// maps (128 bytes each, in the spec's order), then a key of 8 u64: the n tensors' addresses, then
// the call's shape (its dims, zero-padded). The sandbox fills a slot for each new key before the
// call that needs it (outside any timed region, once per input set) and reuses it afterwards; a
// kernel scans the keys for its own call and, finding none, must run without TMA (the maps are
// absent when the driver lacks cuTensorMapEncodeTiled, when a tensor breaks TMA's rules: address
// or a row stride not a multiple of 16 bytes, a dim of 2^31 or more). The torch library that plugs
// tuned kernels into models writes the slots with a kernel of its own, which a CUDA graph captures
// with the calls (worker/sandbox/candidate.h, CudaDevice::map_writer).
inline constexpr const char* kTensorMapSymbol = "ak_tensor_maps";
inline constexpr int kTensorMapSlots = 16;  // a multi-phase call's keys for each of up to 4 input sets

// A multi-phase type's maps for one phase of a call (KernelSpec::cuda_phase_tensor_maps): the maps,
// and the dims its slot key holds after their addresses (a GEMM phase: its M, N, K).
struct PhaseTensorMaps {
  std::vector<TensorMapSpec> maps;
  std::vector<int64_t> key;
};
inline constexpr size_t tensor_map_slot_bytes(size_t maps) { return maps * 128 + 64; }

struct KernelSpec {
  std::string name;                      // "softmax"
  std::string family;                    // a norm at another eps: its base type (rmsnorm_e5: "rmsnorm")
  std::vector<DType> dtypes;
  std::map<Backend, BackendSource> backends;
  // |out - ref| <= atol * scale + rtol * |ref|; scale is 1 unless the type's libtorch harness
  // defines a tolerance_scale (kernels/reference.h). The whole rule (subnormals, NaN, inf):
  // worker/sandbox/tolerance.h.
  std::map<DType, Tolerance> tolerance;
  // Minimum work of one call, for throughput and roofline figures.
  double (*flops)(const std::vector<int64_t>& shape);
  double (*bytes)(const std::vector<int64_t>& shape, DType dtype);
  // Validates a shape for this type ("softmax needs [rows, cols] with both >= 1").
  std::string (*check_shape)(const std::vector<int64_t>& shape);
  // cuda backend: the launch geometry of the starter source (and of any candidate that keeps its
  // contract). nullptr for a type without a cuda backend. config holds the candidate's tunables;
  // a tunable it lacks takes the space's default.
  LaunchGeometry (*cuda_geometry)(const std::map<std::string, int64_t>& config,
                                  const std::vector<int64_t>& shape, DType dtype) = nullptr;
  // cuda backend: an upper bound on the static shared memory per block [bytes] of the starter
  // source in any configuration of its space and any dtype: its __shared__ variables, padded to the
  // dynamic part's alignment, as the driver reports them (CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES) and
  // counts them beside the geometry's dynamic shared_bytes against the device's opt-in limit (the
  // 1 KiB the driver reserves a block lies outside that limit and is not counted). The coordinator
  // counts it too when it prunes a study's proposals (coordinator/study.cc, feasibility), so that
  // it does not propose what the sandbox then refuses to launch; a custom source's is unknown there.
  // Measured from sm_90a cubins (tests/worker/compiler_test.cc,
  // EveryStartersStaticSharedMemoryIsWithinItsSpecsBound).
  unsigned cuda_static_shared_bytes = 0;
  // cuda backend: the compile-time constraints of the starter source on its tunables (its #error
  // lines) as a reason, "" when the configuration compiles. Studies prune what fails it instead of
  // spending a trial on a COMPILE_ERROR. nullptr: the source has no such constraints.
  std::string (*cuda_config_error)(const std::map<std::string, int64_t>& config, DType dtype) = nullptr;
  // cuda backend, types whose call is several launches of one kernel (fused_mlp: three GEMM
  // phases): a call launches it cuda_phases times in order on one stream, phase p with the
  // geometry cuda_phase_geometry(config, shape, dtype, p) and the type's parameters followed by
  // the workspace pointer (when workspace_bytes is set) and p as an int64. With cuda_phases 1
  // (every other type) a call is one launch of cuda_geometry with the type's parameters only.
  int cuda_phases = 1;
  LaunchGeometry (*cuda_phase_geometry)(const std::map<std::string, int64_t>& config,
                                        const std::vector<int64_t>& shape, DType dtype, int phase) = nullptr;
  // Scratch memory of one call [bytes] (nullptr: none), on the device, owned by the harness and
  // passed after the type's parameters. Its contents are undefined at the start of a call (the
  // sandbox fills it with NaN once): a candidate writes what it reads.
  int64_t (*workspace_bytes)(const std::vector<int64_t>& shape, DType dtype) = nullptr;
  // triton backend: the grid of a launch (block and dynamic shared memory come from the compiled
  // kernel's metadata, worker/triton/README.md) and the runtime parameters of the Triton kernel
  // in its order, in compile.py's --signature syntax ("x_ptr:*fp16,y_ptr:*fp16,rows:i64,cols:i64").
  // Its parameters are passed as the cuda backend's (cuda_params), so the order must agree.
  // The tunables AK_NUM_WARPS and AK_NUM_STAGES become Triton's num_warps and num_stages; every
  // other tunable is a tl.constexpr parameter of that name.
  LaunchGeometry (*triton_grid)(const std::map<std::string, int64_t>& config, const std::vector<int64_t>& shape,
                                DType dtype) = nullptr;
  std::string (*triton_signature)(DType dtype) = nullptr;
  // Parameters (signature names) of a second build that assumes them 16-divisible (pointers: the
  // address in bytes; integers: the value), for vector loads and asynchronous copies; the sandbox
  // launches it whenever every named value is. Empty: one build.
  std::vector<std::string> triton_divisible;
  // cuda backend: the tensor maps (above) a configuration's kernel reads, for a call of `shape`;
  // empty (or nullptr): none. The slot key holds the maps' addresses, then `shape`. For the
  // single-launch call (cuda_phases 1).
  std::vector<TensorMapSpec> (*cuda_tensor_maps)(const std::map<std::string, int64_t>& config,
                                                 const std::vector<int64_t>& shape, DType dtype) = nullptr;
  // cuda backend, multi-phase types: the maps phase `phase` of a call of `shape` reads, with its
  // key dims; every phase with maps has as many as the others. nullptr or empty maps: none.
  PhaseTensorMaps (*cuda_phase_tensor_maps)(const std::map<std::string, int64_t>& config,
                                            const std::vector<int64_t>& shape, DType dtype, int phase) = nullptr;
  // Sizes that are multiples of no tile (1, 127, 1023, 4097, ...): stage verify.edge runs the
  // candidate at each of them. Small enough for the CPU backend.
  std::vector<std::vector<int64_t>> edge_shapes;
};

// The maps each launch of one call reads, a group per launch: one (the type's cuda_tensor_maps,
// keyed by the shape), or one a phase of a multi-phase type (cuda_phase_tensor_maps); a group
// with no maps where the type declares none.
std::vector<PhaseTensorMaps> tensor_map_groups(const KernelSpec& spec, const std::map<std::string, int64_t>& config,
                                               const std::vector<int64_t>& shape, DType dtype);

// Whether a cuda configuration's kernel reads TMA tensor maps at `shape` (in any phase): its speed
// then depends on the maps the sandbox builds, which other launchers (the torch library) do not.
bool reads_tensor_maps(const KernelSpec& spec, const std::map<std::string, int64_t>& config,
                       const std::vector<int64_t>& shape, DType dtype);

// nullptr if unknown.
const KernelSpec* find(std::string_view name);
std::vector<const KernelSpec*> all();
// Every type's name, comma-separated ("softmax, reduce, ..."), for error messages.
std::string type_names();

// Every point of the space (cartesian product), in a stable order.
std::vector<std::map<std::string, int64_t>> enumerate_space(const std::vector<Tunable>& space);
std::map<std::string, int64_t> default_config(const std::vector<Tunable>& space);
// The space's defaults with the source's per-dtype defaults on top: the starter's default
// configuration for a job of that dtype.
std::map<std::string, int64_t> default_config(const BackendSource& source, DType dtype);
// `given` (a campaign's or a study start's configuration) completed with the defaults for `dtype`.
// The dtype's own defaults (dtype_defaults) fill it where the configuration they make can be built
// (`config_error`, the starter's KernelSpec::cuda_config_error; null: no check); where it cannot but
// the space's plain defaults can, those fill it: {AK_WARPS = 4} in bf16 keeps flash_attention's
// mma.sync path, since bf16's AK_WGMMA = 1 cannot run that tile.
std::map<std::string, int64_t> complete_config(const BackendSource& source, DType dtype,
                                               const std::map<std::string, int64_t>& given,
                                               std::string (*config_error)(const std::map<std::string, int64_t>&,
                                                                           DType) = nullptr);
// The value of tunable `name`: config's entry if present, else the space's default, else
// `fallback`.
int64_t config_value(const std::map<std::string, int64_t>& config, const std::vector<Tunable>& space,
                     const std::string& name, int64_t fallback);

// Shared by the row-wise types (softmax, reduce, ...), whose shape is [rows, cols]:
// "<type> needs a [rows, cols] shape ..." when the shape is not two dims >= 1 with cols <= 2^31.
std::string check_rows_cols(const std::string& type, const std::vector<int64_t>& shape);
// Block = AK_THREADS threads; grid = rows blocks (AK_WARP_PER_ROW=0) or ceil(rows / (AK_THREADS /
// 32)) (AK_WARP_PER_ROW=1), capped at 2^31 - 1 (the kernels visit rows with a grid-stride loop);
// no dynamic shared memory.
LaunchGeometry row_geometry(const std::map<std::string, int64_t>& config, const std::vector<Tunable>& space,
                            const std::vector<int64_t>& shape);

// row_geometry with the space of the type's cuda source: the cuda_geometry of a row-wise type,
// k.cuda_geometry = row_geometry_for<cuda_space>.
template <std::vector<Tunable> (*Space)()>
LaunchGeometry row_geometry_for(const std::map<std::string, int64_t>& config, const std::vector<int64_t>& shape,
                                DType) {
  static const std::vector<Tunable> space = Space();
  return row_geometry(config, space, shape);
}

// The search spaces and edge sizes the row-wise types share:
//   cuda:   AK_THREADS (128, 256, 512, 1024), AK_VEC (vec_values), AK_WARP_PER_ROW (0, 1);
//   cpu:    AK_VEC lanes (1, 4, 8, 16), default 8;
//   triton: BLOCK (blocks), AK_NUM_WARPS (4, 8, 16), AK_NUM_STAGES (1, 2) with default 1;
//   edges:  1x1, 1x127, 127x1, 3x1023, 2x4097, 1x65537, 129x257.
std::vector<Tunable> row_cuda_space(int64_t threads_default, std::vector<int64_t> vec_values, int64_t vec_default);
std::vector<Tunable> row_cpu_space();
std::vector<Tunable> row_triton_space(std::vector<int64_t> blocks, int64_t block_default, int64_t warps_default);
std::vector<std::vector<int64_t>> row_edge_shapes();

// The same kernel type at another eps (norms): `base` renamed `name`, with every occurrence of
// the eps literal `from` ("1e-6") in each backend's source, comments included, replaced by `to`
// ("1e-5"). A model's norm runs at the eps it was trained with, and an eps is a constant of a
// starter, so each eps in use is its own kernel type (rmsnorm_e5) with its own studies and tuning
// entries. Throws std::logic_error when a backend's source does not contain `from`.
KernelSpec with_eps(KernelSpec base, std::string name, std::string_view from, std::string_view to);

// Triton grid of the row-wise sources: one program per row, grid = (rows, 1, 1) (at most 2^31 - 1).
LaunchGeometry one_program_per_row(const std::map<std::string, int64_t>& config, const std::vector<int64_t>& shape,
                                   DType dtype);

}  // namespace ak::kernels
