#!/usr/bin/env python3
"""GPU check of the launch ABI that compile.py writes to kernel.json: compiles softmax.py, loads
the cubin through the CUDA driver API (ctypes on libcuda: cuModuleLoadData, cuModuleGetFunction,
cuLaunchKernel with a void** array of 8-byte slots, hidden scratch pointers null), exactly as the
C++ harness does, and compares with torch.softmax in fp64. Skips (exit code 77, CTest's
SKIP_RETURN_CODE) only where the machine has no GPU; on a machine with one, a missing torch or a
torch that sees no CUDA device is a failure.

    python3 tests/worker/triton/launch_test.py            # tests
    python3 tests/worker/triton/launch_test.py --bench    # median kernel times of a few shapes
"""

import ctypes
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
COMPILE = os.path.join(ROOT, "worker", "triton", "compile.py")
SOFTMAX = os.path.join(ROOT, "kernels", "softmax", "softmax.py")

try:
    import torch
    HAVE_GPU = torch.cuda.is_available()
    TORCH_ERROR = None
except ImportError as e:
    torch = None
    HAVE_GPU = False
    TORCH_ERROR = e

SKIP_RETURN_CODE = 77  # tests/CMakeLists.txt, ak_python_test


def gpu_present():
    """Whether this machine has an NVIDIA GPU, asked without torch: a device node, or a device the
    driver counts."""
    if os.path.exists("/dev/nvidia0"):
        return True
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return lib.cuInit(0) == 0 and lib.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


def require_gpu_or_skip():
    """Returns where torch can launch on a GPU; exits with SKIP_RETURN_CODE where there is no GPU,
    and with 1 where there is one that torch cannot use."""
    if HAVE_GPU:
        return
    if not gpu_present():
        print("SKIPPED: no NVIDIA GPU on this machine (no /dev/nvidia0, no device from libcuda.so.1)")
        sys.exit(SKIP_RETURN_CODE)
    why = f"import torch failed: {TORCH_ERROR}" if torch is None else "torch.cuda.is_available() is False"
    sys.exit(f"FAILED: this machine has an NVIDIA GPU but {why}; run with the Python that has torch with CUDA")

DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
# kernels/softmax/spec.cc
TOLERANCE = {"fp32": (1e-6, 2e-5), "fp16": (1e-5, 2e-3), "bf16": (1e-5, 1.6e-2)}
EDGE_SHAPES = [(1, 1), (1, 127), (127, 1), (3, 1023), (2, 4097), (1, 65537), (129, 257)]
DEFAULT_SHAPES = [(4096, 4096), (1000, 1023), (64, 50257)]


def compile_softmax(out_dir, dtype, block, num_warps, divisible=()):
    args = [sys.executable, COMPILE, "--source", SOFTMAX, "--kernel", "softmax_kernel", "--signature",
            f"x_ptr:*{dtype},y_ptr:*{dtype},rows:i64,cols:i64", "--constexpr", f"BLOCK={block}", "--num-warps",
            str(num_warps), "--arch", "90", "--out-dir", out_dir]
    for name in divisible:
        args += ["--divisible", name]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"compile.py failed ({proc.returncode}): {proc.stderr}")
    with open(os.path.join(out_dir, "kernel.json")) as f:
        info = json.load(f)
    with open(os.path.join(out_dir, "kernel.cubin"), "rb") as f:
        cubin = f.read()
    return info, cubin


class Driver:
    """The few driver calls the C++ harness makes, through ctypes."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        torch.zeros(1, device="cuda")  # makes torch's primary context current on this thread

    def check(self, rc, what):
        if rc != 0:
            s = ctypes.c_char_p()
            self.lib.cuGetErrorString(rc, ctypes.byref(s))
            raise RuntimeError(f"{what} failed: {rc} {s.value.decode() if s.value else ''}")

    def load(self, cubin, name, shared_bytes):
        mod = ctypes.c_void_p()
        self.check(self.lib.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(cubin)), "cuModuleLoadData")
        fn = ctypes.c_void_p()
        self.check(self.lib.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()), "cuModuleGetFunction")
        if shared_bytes > 48 * 1024:
            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
            self.check(self.lib.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                   shared_bytes), "cuFuncSetAttribute")
        return mod, fn

    def launch(self, fn, grid, info, values):
        """values: one int per parameter of info['params'], each stored in an 8-byte slot."""
        n = len(values)
        assert n == len(info["params"])
        slots = (ctypes.c_uint64 * n)(*[v & 0xFFFFFFFFFFFFFFFF for v in values])
        base = ctypes.addressof(slots)
        params = (ctypes.c_void_p * n)(*[base + 8 * i for i in range(n)])
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        bx, by, bz = info["block"]
        self.check(
            self.lib.cuLaunchKernel(fn, grid[0], grid[1], grid[2], bx, by, bz, info["shared_bytes"], stream, params,
                                    None), "cuLaunchKernel")


def softmax_args(info, x, y, rows, cols):
    args = {"x_ptr": x.data_ptr(), "y_ptr": y.data_ptr(), "rows": rows, "cols": cols, "global_scratch": 0,
            "profile_scratch": 0}
    assert info["global_scratch_bytes"] == 0 and info["profile_scratch_bytes"] == 0
    return [args[p["name"]] for p in info["params"]]


@unittest.skipUnless(HAVE_GPU, "no CUDA device (torch.cuda.is_available() is False); nothing to launch")
class SoftmaxCubinLaunches(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ak-triton-launch-")
        cls.drv = Driver()
        cls.kernels = {}
        for dtype in DTYPES:
            for block, warps in ((1024, 4), (4096, 8), (128, 1)):
                info, cubin = compile_softmax(os.path.join(cls.tmp.name, f"{dtype}-{block}"), dtype, block, warps)
                _, fn = cls.drv.load(cubin, info["name"], info["shared_bytes"])
                cls.kernels[(dtype, block)] = (info, fn)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_and_check(self, dtype, block, x, offset=0, grid_rows=None):
        """Runs the cubin on x (rows x cols, a view `offset` elements into its buffer) and checks
        the output against fp64 torch.softmax, and that nothing outside the output was written."""
        info, fn = self.kernels[(dtype, block)]
        rows, cols = x.shape
        guard = 64
        buf = torch.full((offset + rows * cols + guard, ), 7.0, dtype=x.dtype, device="cuda")
        y = buf[offset:offset + rows * cols].view(rows, cols)
        self.drv.launch(fn, (grid_rows or rows, 1, 1), info, softmax_args(info, x, y, rows, cols))
        torch.cuda.synchronize()
        ref = torch.softmax(x.double(), dim=-1)
        atol, rtol = TOLERANCE[dtype]
        torch.testing.assert_close(y.double(), ref, atol=atol, rtol=rtol, equal_nan=True)
        self.assertTrue(bool((buf[:offset] == 7.0).all()) and bool((buf[offset + rows * cols:] == 7.0).all()),
                        "write outside the output")

    def test_every_dtype_and_block_matches_torch_on_default_and_edge_shapes(self):
        torch.manual_seed(0)
        for (dtype, block) in self.kernels:
            for rows, cols in DEFAULT_SHAPES + EDGE_SHAPES:
                with self.subTest(dtype=dtype, block=block, shape=(rows, cols)):
                    x = (torch.randn(rows, cols, device="cuda") * 4).to(getattr(torch, DTYPES[dtype]))
                    self.run_and_check(dtype, block, x)

    def test_misaligned_pointers_and_odd_columns_are_correct(self):
        torch.manual_seed(1)
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                t = getattr(torch, DTYPES[dtype])
                base = torch.randn(3 * 1001 + 1, device="cuda").to(t)
                x = base[1:].view(3, 1001)  # 2- or 4-byte aligned only
                self.run_and_check(dtype, 1024, x, offset=1)

    def test_hostile_values_follow_torch(self):
        torch.manual_seed(2)
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                t = getattr(torch, DTYPES[dtype])
                x = torch.randn(6, 3000, device="cuda")
                x[0] += 1000.0  # large offset: needs the max subtraction
                x[1, ::7] = float("-inf")  # masked entries
                x[2] = float("-inf")  # fully masked row: NaN like torch
                x[3, 2500] = float("nan")  # NaN row
                x[4, 5] = float("nan")  # NaN before any finite value... after -inf ones
                x[4, :5] = float("-inf")
                x[5] *= 1e-3  # near-uniform
                self.run_and_check(dtype, 1024, x.to(t))

    def test_a_grid_larger_than_rows_is_harmless(self):
        x = torch.randn(5, 300, device="cuda")
        self.run_and_check("fp32", 128, x, grid_rows=64)


def bench():
    """Median kernel time [us] of each variant against torch.softmax."""
    drv = Driver()
    tmp = tempfile.TemporaryDirectory(prefix="ak-triton-bench-")
    variants = [("plain", ()), ("divisible", ("x_ptr", "y_ptr", "cols"))]
    cases = [((4096, 4096), 1024, 4), ((4096, 50257), 4096, 8), ((8192, 32000), 4096, 8), ((1000, 1023), 1024, 4)]
    print("dtype shape BLOCK/warps variant us GB/s | torch us")
    for dtype in ("fp16", "fp32"):
        t = getattr(torch, DTYPES[dtype])
        for (rows, cols), block, warps in cases:
            x = torch.randn(rows, cols, device="cuda").to(t)
            y = torch.empty_like(x)
            nbytes = 2 * x.numel() * x.element_size()

            def timed(fn_launch):
                for _ in range(3):
                    fn_launch()
                times = []
                for _ in range(20):
                    a = torch.cuda.Event(enable_timing=True)
                    b = torch.cuda.Event(enable_timing=True)
                    a.record()
                    fn_launch()
                    b.record()
                    b.synchronize()
                    times.append(a.elapsed_time(b) * 1e3)
                return sorted(times)[len(times) // 2]

            t_torch = timed(lambda: torch.softmax(x, dim=-1))
            for vname, div in variants:
                if div and cols % 16:
                    continue
                info, cubin = compile_softmax(os.path.join(tmp.name, f"{dtype}-{rows}-{vname}"), dtype, block, warps,
                                              div)
                _, fn = drv.load(cubin, info["name"], info["shared_bytes"])
                args = softmax_args(info, x, y, rows, cols)
                us = timed(lambda: drv.launch(fn, (rows, 1, 1), info, args))
                torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), atol=1e-3, rtol=2e-2)
                print(f"{dtype} {rows}x{cols} {block}/{warps} {vname} {us:.1f} {nbytes / us / 1e3:.0f} | {t_torch:.1f}")
    tmp.cleanup()


if __name__ == "__main__":
    if "--bench" in sys.argv:
        sys.exit(bench() or 0) if HAVE_GPU else sys.exit("no CUDA device")
    require_gpu_or_skip()
    unittest.main(verbosity=2)
