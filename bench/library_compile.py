"""The torch.compile(mode="max-autotune") column of the kernel library's benchmark.

Reads the farm's results.tsv of bench/library.sh (one row per kernel type, shape and dtype: the
starter's median and PyTorch eager's, both timed cold by the farm in alternation), times the same
op compiled by torch.compile with max-autotune on inputs of the same shape and dtype, cold, with
triton.testing.do_bench (it clears a 256 MB buffer before every run), and prints the results table
in markdown; writes it as JSON too.

    python bench/library_compile.py RESULTS_TSV OUT_JSON [--only-largest] [--dtypes bf16,fp16]

--only-largest compiles one shape per (type, dtype), the largest, to keep the autotuning time
short; the other rows keep an empty compile column.
"""
import argparse
import csv
import json
import math
import sys
import time

import os

import torch
import torch.nn.functional as F
import triton
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from classify import NORM_FAMILY, NORM_TYPES  # noqa: E402  the norm types by their eps

# type -> (family, eps): rmsnorm_e5 is rmsnorm at 1e-5
_NORMS = {t: (family, eps) for family, types in NORM_TYPES.items() for eps, t in types.items()}

DT = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def rotate_half_rope(x, cos, sin):
    # the eager code of Hugging Face's LLaMA with tables [tokens, dim / 2]
    h = x.shape[-1] // 2
    c = torch.cat([cos, cos], dim=-1).unsqueeze(1)
    s = torch.cat([sin, sin], dim=-1).unsqueeze(1)
    rotated = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
    return x * c + rotated * s


def make(kind, shape, dtype):
    """The op and its inputs, as the farm's harness builds them (kernels/<type>/reference.cc)."""
    dev = "cuda"
    family, eps = _NORMS.get(kind, (kind, None))
    if kind in ("softmax", "reduce", "reduce_max", "cross_entropy") or kind in NORM_FAMILY:
        rows, cols = shape
        x = (torch.randn(rows, cols, device=dev) * 2).to(dtype)
        if kind == "softmax":
            return (lambda x: torch.softmax(x, dim=-1)), (x,)
        if kind == "reduce":
            return (lambda x: x.sum(dim=-1)), (x,)
        if kind == "reduce_max":
            return (lambda x: x.amax(dim=-1)), (x,)
        if family == "rmsnorm":
            w = (1 + 0.2 * torch.randn(cols, device=dev)).to(dtype)
            return (lambda x, w: F.rms_norm(x, (x.shape[-1],), w, eps)), (x, w)
        if family == "layernorm":
            w = (1 + 0.2 * torch.randn(cols, device=dev)).to(dtype)
            b = (0.1 * torch.randn(cols, device=dev)).to(dtype)
            return (lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, eps)), (x, w, b)
        t = torch.randint(0, cols, (rows,), device=dev)
        return (lambda x, t: F.cross_entropy(x, t, reduction="none")), (x, t)
    if kind == "rotary_embedding":
        tokens, heads, dim = shape
        x = torch.randn(tokens, heads, dim, device=dev).to(dtype)
        inv = 10000.0 ** (-torch.arange(0, dim // 2, device=dev, dtype=torch.float64) * 2.0 / dim)
        ang = torch.outer(torch.arange(tokens, device=dev, dtype=torch.float64), inv)
        return rotate_half_rope, (x, ang.cos().to(dtype), ang.sin().to(dtype))
    if kind in ("flash_attention", "flash_attention_causal"):
        b, h, s, d = shape
        q, k, v = (torch.randn(b, h, s, d, device=dev).to(dtype) for _ in range(3))
        causal = kind == "flash_attention_causal"
        return (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)), (q, k, v)
    if kind == "matmul":
        m, n, k = shape
        a = torch.randn(m, k, device=dev).to(dtype)
        b = torch.randn(k, n, device=dev).to(dtype)
        return (lambda a, b: a @ b), (a, b)
    if kind == "fused_mlp":
        m, h, f = shape
        x = torch.randn(m, h, device=dev).to(dtype)
        wg, wu = ((torch.randn(h, f, device=dev) / h ** 0.5).to(dtype) for _ in range(2))
        wd = (torch.randn(f, h, device=dev) / f ** 0.5).to(dtype)
        return (lambda x, wg, wu, wd: (F.silu(x @ wg) * (x @ wu)) @ wd), (x, wg, wu, wd)
    raise ValueError(f"no torch.compile baseline for kernel type {kind}")


def compile_us(kind, shape, dtype):
    torch._dynamo.reset()
    fn, args = make(kind, shape, DT[dtype])
    # max-autotune runs the graph as a CUDA graph, which copies every input whose address is not
    # known to be static into the graph's own buffer before each replay: that copy would be timed
    # (it tripled a sum's time). A model's weights and activations are static inside its graph.
    for t in args:
        torch._dynamo.mark_static_address(t)
    cf = torch.compile(fn, mode="max-autotune", dynamic=False)
    t0 = time.time()
    cf(*args)
    torch.cuda.synchronize()
    compile_s = time.time() - t0
    ms = do_bench(lambda: cf(*args), warmup=25, rep=200, return_mode="median")
    return ms * 1000.0, compile_s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results_tsv")
    ap.add_argument("out_json")
    ap.add_argument("--only-largest", action="store_true")
    ap.add_argument("--dtypes", default="")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 is fp32, as in the farm
    with open(a.results_tsv) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    want_dtypes = set(a.dtypes.split(",")) if a.dtypes else None
    largest = {}
    for r in rows:
        shape = [int(v) for v in r["shape"].split("x")]
        key = (r["kernel_type"], r["dtype"])
        if key not in largest or math.prod(shape) > math.prod(largest[key]):
            largest[key] = shape
    out = []
    for r in rows:
        shape = [int(v) for v in r["shape"].split("x")]
        kind, dtype = r["kernel_type"], r["dtype"]
        # A variant's campaign (bench/library.sh) is tagged bench/library/<variant>: its own row,
        # without a torch.compile figure of its own (the starter's row has the op's).
        variant = r.get("tag", "").split("bench/library/", 1)[1] if r.get("tag", "").startswith("bench/library/") else ""
        row = {"kernel_type": kind + ("" if r.get("backend", "cuda") == "cuda" else " (" + r["backend"] + ")")
               + (f" [{variant}]" if variant else ""),
               "shape": r["shape"], "dtype": dtype, "status": r["correctness"],
               "candidate_us": float(r["latency_us"] or 0), "eager_us": float(r["baseline_us"] or 0),
               "bound": r["bound"], "pct_peak": float(r["pct_peak"] or 0),
               "gbps": float(r["bandwidth_gbps"] or 0), "tflops": float(r["throughput_tflops"] or 0),
               "config": r["config"], "compile_us": None, "compile_s": None}
        run = (not a.only_largest or shape == largest[(kind, dtype)]) and (want_dtypes is None or dtype in want_dtypes) and r.get("backend", "cuda") == "cuda" and not variant
        if run:
            try:
                row["compile_us"], row["compile_s"] = compile_us(kind, shape, dtype)
            except Exception as e:  # a failed compile is reported, not fatal
                row["compile_error"] = f"{type(e).__name__}: {e}"[:300]
        out.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    with open(a.out_json, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                   "rows": out}, f, indent=1)
    print(f"| type | shape | dtype | status | median us | GB/s | TFLOP/s | % ceiling | eager us | compile us "
          f"| vs eager | vs compile |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in out:
        c, e, k = r["candidate_us"], r["eager_us"], r["compile_us"]
        vs_e = f"{e / c:.2f}x" if c > 0 and e > 0 else "-"
        vs_k = f"{k / c:.2f}x" if c > 0 and k else "-"
        print(f"| {r['kernel_type']} | {r['shape']} | {r['dtype']} | {r['status']} | {c:.1f} | {r['gbps']:.0f} "
              f"| {r['tflops']:.1f} | {r['pct_peak']:.1f} ({r['bound']}) | {e:.1f} "
              f"| {k:.1f} | {vs_e} | {vs_k} |" if k else
              f"| {r['kernel_type']} | {r['shape']} | {r['dtype']} | {r['status']} | {c:.1f} | {r['gbps']:.0f} "
              f"| {r['tflops']:.1f} | {r['pct_peak']:.1f} ({r['bound']}) | {e:.1f} | - | {vs_e} | - |")


if __name__ == "__main__":
    main()
