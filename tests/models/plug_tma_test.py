#!/usr/bin/env python3
"""The torch library (models/plug/ops.cc) runs tuned kernels whose configurations read TMA tensor
maps, eagerly and inside CUDA graphs, and runs them on their TMA path.

On a Hopper GPU (label gpu; exit 77, ctest's skip, elsewhere), with nvcc building the starters:
- matmul 4096^3 bf16, TMA configuration (AK_WGMMA=2, 128x256): eager calls and a CUDA graph's
  replays match torch.mm. TMA path in use: the kernel reaches at least 0.65x of cuBLAS eagerly (the
  library's checks and launch on the host included) and 0.72x replayed (on an H100 its TMA path
  runs at 0.86x, every path without TMA at 0.6x or less).
- The graph reads the slots it writes itself: after the capture (whose warm-up left the same key
  in an eager slot) every eager slot is rewritten by 16 calls on other live tensors before the
  replays are checked and timed.
- fused_mlp 2048x4096x14336 bf16, the gate/up TMA configuration (AK_GATEUP=1, three phases, a
  workspace): two "layers" (other weights) captured in one graph, replayed after the eager slots
  were rewritten, each matching an fp32 reference; replayed at least 0.8x as fast as PyTorch's
  sequence (mm, silu, mul, mm) in a graph (TMA: about 1.0x; the phases without TMA: about 0.5x).

  python3 tests/models/plug_tma_test.py --gpu --ops-lib build/bin/libautokernel_ops.so
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MATMUL = {"AK_WGMMA": 2, "AK_BM": 128, "AK_BN": 256, "AK_BK": 64, "AK_STAGES": 4, "AK_WARPS_M": 2,
          "AK_WARPS_N": 4, "AK_GROUP_M": 8, "AK_MAX_BLOCKS": 132}
FUSED = {"AK_WGMMA": 3, "AK_BM": 64, "AK_BN": 256, "AK_BK": 64, "AK_STAGES": 5, "AK_WARPS_M": 2,
         "AK_WARPS_N": 4, "AK_GROUP_M": 8, "AK_MAX_BLOCKS": 132, "AK_GATEUP": 1}


def build(source, config, out):
    cmd = ["nvcc", "-cubin", "-arch=sm_90a", "-std=c++17", "-DAK_DTYPE=2"]
    cmd += [f"-D{k}={v}" for k, v in config.items()]
    cmd += [os.path.join(ROOT, source), "-o", out]
    subprocess.run(cmd, check=True)


def time_us(fn, iters=20):
    import torch
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    times.sort()
    return times[len(times) // 2]


def capture(fn):
    import torch
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()  # warm-up on the side stream, as torch.cuda.graph's documentation asks
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    return g, out


def close(got, want, atol, rtol, what):
    err = (got.float() - want.float()).abs()
    bound = atol + rtol * want.float().abs()
    bad = int((err > bound).sum())
    if bad:
        raise AssertionError(f"{what}: {bad} of {err.numel()} outside tolerance (largest error {float(err.max()):.4g})")


def check(name, ours, torch_us, least):
    ratio = torch_us / ours
    print(f"{name}: {ours:.1f} us, PyTorch {torch_us:.1f} us ({ratio:.3f}x)")
    if ratio < least:
        raise AssertionError(f"{name}: {ratio:.3f}x of PyTorch, below {least}x: the TMA path is not in use")


def flush_eager_slots(call, index, make, n=16):
    """Every eager slot (15 of 16 once a graph reserved one) rewritten by calls on tensors kept alive,
    so that no eager slot still holds a graph's key."""
    keep = [make() for _ in range(n)]
    for args in keep:
        call(index, args)
    return keep


def run(ops_lib, work):
    import torch
    build("kernels/matmul/matmul.cu", MATMUL, f"{work}/mm.cubin")
    build("kernels/fused_mlp/fused_mlp.cu", FUSED, f"{work}/mlp.cubin")
    m = [4096, 4096, 4096]
    f = [2048, 4096, 14336]  # Llama-3-8B's MLP at 2048 tokens
    manifest = {"device": "cuda:0", "arch": "sm_90a", "entries": [
        {"kernel_type": "matmul", "backend": "cuda", "dtype": "bf16", "shape": m, "config": MATMUL,
         "artifact": f"{work}/mm.cubin", "entry": "ak_matmul"},
        {"kernel_type": "fused_mlp", "backend": "cuda", "dtype": "bf16", "shape": f, "config": FUSED,
         "artifact": f"{work}/mlp.cubin", "entry": "ak_fused_mlp"}]}
    with open(f"{work}/plug.json", "w") as fh:
        json.dump(manifest, fh)
    torch.ops.load_library(ops_lib)
    assert torch.ops.autokernel.load(f"{work}/plug.json") == 2
    call = torch.ops.autokernel.call
    torch.manual_seed(0)
    dev = "cuda"

    # matmul, eager: against torch.mm, and fast enough that only the TMA path explains it
    a = torch.randn(m[0], m[2], device=dev, dtype=torch.bfloat16)
    b = torch.randn(m[2], m[1], device=dev, dtype=torch.bfloat16)
    tol = (0.05 * m[2] ** 0.5, 1.6e-2)
    close(call(0, [a, b]), torch.mm(a.float(), b.float()), *tol, "matmul eager")
    check("matmul eager", time_us(lambda: call(0, [a, b])), time_us(lambda: torch.mm(a, b)), 0.65)

    # in a CUDA graph: new tensors, captured; then every eager slot rewritten; replayed
    a2, b2 = torch.randn_like(a), torch.randn_like(b)
    g, out = capture(lambda: call(0, [a2, b2]))
    gt, _ = capture(lambda: torch.mm(a2, b2))
    keep = flush_eager_slots(call, 0, lambda: [torch.randn_like(a), torch.randn_like(b)])
    want2 = torch.mm(a2.float(), b2.float())
    for _ in range(2):
        out.zero_()
        g.replay()
        torch.cuda.synchronize()
        close(out, want2, *tol, "matmul replayed")
        call(0, keep[0])  # an eager call between the replays
    check("matmul replayed", time_us(g.replay), time_us(gt.replay), 0.72)
    del keep
    print("matmul: eager and replayed match torch.mm")

    # fused_mlp, gate/up: two layers in one graph
    def layer():
        return [torch.randn(f[1], f[2], device=dev, dtype=torch.bfloat16) / f[1] ** 0.5,
                torch.randn(f[1], f[2], device=dev, dtype=torch.bfloat16) / f[1] ** 0.5,
                torch.randn(f[2], f[1], device=dev, dtype=torch.bfloat16) / f[2] ** 0.5]
    x = torch.randn(f[0], f[1], device=dev, dtype=torch.bfloat16)
    w1, w2 = layer(), layer()

    def reference(w):  # fp32 from the same bf16 values
        xf, (wg, wu, wd) = x.float(), [t.float() for t in w]
        return torch.mm(torch.nn.functional.silu(xf @ wg) * (xf @ wu), wd)

    def eager(w):
        return torch.mm(torch.nn.functional.silu(torch.mm(x, w[0])) * torch.mm(x, w[1]), w[2])
    g2, (o1, o2) = capture(lambda: (call(1, [x] + w1), call(1, [x] + w2)))
    g2t, _ = capture(lambda: (eager(w1), eager(w2)))
    keep = flush_eager_slots(call, 1, lambda: [torch.randn_like(x)] + layer(), n=8)  # 3 slots a call
    for _ in range(2):
        o1.zero_()
        o2.zero_()
        g2.replay()
        torch.cuda.synchronize()
        for o, w, what in ((o1, w1, "layer 1"), (o2, w2, "layer 2")):
            # outputs of about 1: bf16's rounding of the intermediate and the output, with a margin
            close(o, reference(w), 5e-2, 3e-2, f"fused_mlp replayed, {what}")
        call(1, keep[0])  # an eager call between the replays
    check("fused_mlp replayed (two layers)", time_us(g2.replay), time_us(g2t.replay), 0.8)
    print("fused_mlp: two layers replayed match the fp32 reference")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", action="store_true", help="run (the test is GPU only)")
    ap.add_argument("--ops-lib", default=os.path.join(ROOT, "build/bin/libautokernel_ops.so"))
    a = ap.parse_args()
    if not a.gpu:
        print("plug_tma_test: SKIPPED (GPU only: --gpu)")
        return SKIP
    try:
        import torch
    except ImportError as e:
        print(f"plug_tma_test: FAILED: no torch on a machine asked to run GPU tests: {e}")
        return 1
    if not torch.cuda.is_available():
        print("plug_tma_test: SKIPPED (no GPU)")
        return SKIP
    if torch.cuda.get_device_capability()[0] < 9:
        print("plug_tma_test: SKIPPED (TMA needs compute capability 9.0 or later)")
        return SKIP
    if not shutil.which("nvcc") or not os.path.exists(a.ops_lib):
        print(f"plug_tma_test: SKIPPED (no nvcc or no {a.ops_lib})")
        return SKIP
    work = tempfile.mkdtemp(prefix="plug-tma-")
    try:
        run(a.ops_lib, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("plug_tma_test: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
