#!/usr/bin/env python3
"""The torch library (models/plug/ops.cc) runs tuned kernels whose configurations read TMA tensor
maps, eagerly and inside CUDA graphs, and runs them on their TMA path.

On a Hopper GPU (label gpu; exit 77, ctest's skip, elsewhere), with nvcc building the starters:
- matmul 4096^3 bf16, TMA configuration (AK_WGMMA=2, 128x256): eager calls and a CUDA graph's
  replays match torch.mm; after 40 eager calls on other tensors (every eager slot rewritten) the
  graph still matches. TMA path in use: the same calls on inputs whose base is 8 bytes off 16
  (no tensor map can describe them: the kernel's path without TMA) take at least 1.25x as long,
  eager and replayed.
- fused_mlp 2048x1024x2816 bf16, the gate/up TMA configuration (AK_GATEUP=1, three phases, a
  workspace): two "layers" (other weights) captured in one graph, replayed, each matching the
  fp32 reference; and faster than its path without TMA.

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


def misaligned(t):
    """The same values at a base 8 bytes off a multiple of 16: contiguous, but no TMA map fits."""
    import torch
    buf = torch.empty(t.numel() + 8, dtype=t.dtype, device=t.device)
    v = buf[4:4 + t.numel()].view(t.shape)
    v.copy_(t)
    assert v.data_ptr() % 16 == 8 and v.is_contiguous()
    return v


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


def check(name, fast, slow, factor=1.25):
    print(f"{name}: TMA {fast:.1f} us, without TMA {slow:.1f} us ({slow / fast:.2f}x)")
    if slow < factor * fast:
        raise AssertionError(f"{name}: the TMA path is not in use ({fast:.1f} us against {slow:.1f} us without it)")


def run(ops_lib, work):
    import torch
    build("kernels/matmul/matmul.cu", MATMUL, f"{work}/mm.cubin")
    build("kernels/fused_mlp/fused_mlp.cu", FUSED, f"{work}/mlp.cubin")
    m = [4096, 4096, 4096]
    f = [2048, 1024, 2816]
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

    # matmul: eager, against torch.mm and against its own path without TMA
    a = torch.randn(m[0], m[2], device=dev, dtype=torch.bfloat16)
    b = torch.randn(m[2], m[1], device=dev, dtype=torch.bfloat16)
    want = torch.mm(a.float(), b.float())
    close(call(0, [a, b]), want, 0.05 * m[2] ** 0.5, 1.6e-2, "matmul eager")
    am, bm = misaligned(a), misaligned(b)
    close(call(0, [am, bm]), want, 0.05 * m[2] ** 0.5, 1.6e-2, "matmul eager without TMA")
    check("matmul eager", time_us(lambda: call(0, [a, b])), time_us(lambda: call(0, [am, bm])))

    # in a CUDA graph: new tensors, captured, replayed; then eager calls on 40 other pairs (every
    # eager slot rewritten) and the replay again
    a2, b2 = torch.randn_like(a), torch.randn_like(b)
    a2m, b2m = misaligned(a2), misaligned(b2)
    g, out = capture(lambda: call(0, [a2, b2]))
    gm, _ = capture(lambda: call(0, [a2m, b2m]))
    want2 = torch.mm(a2.float(), b2.float())
    g.replay()
    torch.cuda.synchronize()
    close(out, want2, 0.05 * m[2] ** 0.5, 1.6e-2, "matmul replayed")
    keep = [(torch.randn_like(a), torch.randn_like(b)) for _ in range(8)]
    for i in range(40):
        x, y = keep[i % 8] if i < 8 else (torch.randn_like(a), torch.randn_like(b))
        call(0, [x, y])
    out.zero_()
    g.replay()
    torch.cuda.synchronize()
    close(out, want2, 0.05 * m[2] ** 0.5, 1.6e-2, "matmul replayed after 40 eager calls")
    check("matmul replayed", time_us(g.replay), time_us(gm.replay))
    print("matmul: eager and replayed match torch.mm")

    # fused_mlp, gate/up: two layers in one graph
    def layer():
        return [torch.randn(f[1], f[2], device=dev, dtype=torch.bfloat16) / f[1] ** 0.5,
                torch.randn(f[1], f[2], device=dev, dtype=torch.bfloat16) / f[1] ** 0.5,
                torch.randn(f[2], f[1], device=dev, dtype=torch.bfloat16) / f[2] ** 0.5]
    x = torch.randn(f[0], f[1], device=dev, dtype=torch.bfloat16)
    w1, w2 = layer(), layer()

    def two_layers(x=x, w1=w1, w2=w2):
        return call(1, [x] + w1), call(1, [x] + w2)

    def reference(w):  # fp32 from the same bf16 values
        xf, (wg, wu, wd) = x.float(), [t.float() for t in w]
        return torch.mm(torch.nn.functional.silu(xf @ wg) * (xf @ wu), wd)
    g2, (o1, o2) = capture(two_layers)
    xm = misaligned(x)
    g2m, _ = capture(lambda: two_layers(x=xm))
    for _ in range(2):
        o1.zero_()
        o2.zero_()
        g2.replay()
        torch.cuda.synchronize()
        for o, w, what in ((o1, w1, "layer 1"), (o2, w2, "layer 2")):
            # outputs of about 1: bf16's rounding of the intermediate and the output, with a margin
            close(o, reference(w), 5e-2, 3e-2, f"fused_mlp replayed, {what}")
        call(1, [torch.randn_like(x)] + layer())  # an eager call between the replays
    check("fused_mlp replayed (two layers)", time_us(g2.replay), time_us(g2m.replay), factor=1.1)
    print("fused_mlp: two layers replayed match the eager sequence")


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
