#!/usr/bin/env python3
"""The farm's faithful eager baselines against KernelBench's own timing, on the same GPU in the
same session.

Reads the farm's baseline file (results/timing/<hardware>/baseline_time_torch.json, written by
`autokernel kb baseline`), times every problem in it with KernelBench's own
`kernelbench.timing.measure_ref_program_time` from a KernelBench checkout kept outside this
repository (same defaults: 5 warm-ups, 100 trials, first discarded, L2 flushed, fp32), and prints
one row per problem with the ratio farm / KernelBench and how many are within the tolerance.

KernelBench's package __init__ imports its LLM clients; only timing.py and eval.py are needed, so
the package is set up without running __init__, and `requests`/`pydantic` (imported by eval.py,
unused by the timing path) are stubbed when this Python lacks them.

  python bench/kernelbench_agreement.py --kernelbench .kb/KernelBench \
      --farm kb-out/results/timing/NVIDIA_H200/baseline_time_torch.json [--levels 1-3] [--ids 1-8,40] \
      [--tolerance 0.03] [--json out.json]
"""
import argparse
import importlib
import json
import os
import statistics
import sys
import types


def load_kernelbench(root):
    src = os.path.join(root, "src", "kernelbench")
    if not os.path.isfile(os.path.join(src, "timing.py")):
        sys.exit(f"no src/kernelbench/timing.py under {root}: pass a KernelBench checkout")
    for name in ("requests", "pydantic"):
        try:
            importlib.import_module(name)
        except ImportError:
            stub = types.ModuleType(name)
            if name == "pydantic":
                class BaseModel:  # eval.py's result class; unused by the timing path
                    def __init__(self, **kw):
                        self.__dict__.update(kw)
                stub.BaseModel = BaseModel
            sys.modules[name] = stub
    pkg = types.ModuleType("kernelbench")
    pkg.__path__ = [src]
    sys.modules["kernelbench"] = pkg
    return importlib.import_module("kernelbench.timing")


def parse_ids(text):
    """'1-8,40' -> {1, ..., 8, 40}; empty -> None (every problem)."""
    if not text:
        return None
    ids = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        ids.update(range(int(lo), int(hi or lo) + 1))
    return ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernelbench", required=True)
    ap.add_argument("--farm", required=True, help="the farm's baseline_time_torch.json")
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--json", default="")
    ap.add_argument("--ids", default="", help="problem ids of every level to time, e.g. 1-8,40 (default: all)")
    ap.add_argument("--levels", default="", help="levels to time, e.g. 1-3 (default: every level in the file)")
    a = ap.parse_args()
    ids = parse_ids(a.ids)
    levels = parse_ids(a.levels)
    timing = load_kernelbench(a.kernelbench)
    import torch

    farm = json.load(open(a.farm))
    levels_dir = os.path.join(a.kernelbench, "KernelBench")
    rows = []
    # A row as soon as it is measured, so a run cut short still shows what it timed.
    print(f"{'level':7} {'problem':52} {'farm ms':>10} {'KB ms':>10} {'ratio':>7}", flush=True)

    def show(r):
        kbm = "-" if r["kernelbench_ms"] is None else f"{r['kernelbench_ms']:.4g}"
        ratio = "-" if "ratio" not in r else f"{r['ratio']:.3f}"
        print(f"{r['level']:7} {r['name'][:52]:52} {r['farm_ms']:>10.4g} {kbm:>10} {ratio:>7}"
              + ("" if r.get("within", True) else "  outside"), flush=True)

    for level, probs in sorted(farm.items()):
        if levels is not None and int(level.removeprefix("level")) not in levels:
            continue
        for name, stats in sorted(probs.items(), key=lambda kv: int(kv[0].split("_")[0])):
            if ids is not None and int(name.split("_")[0]) not in ids:
                continue
            path = os.path.join(levels_dir, level, name)
            code = open(path).read()
            kb = timing.measure_ref_program_time(name, code, num_warmup=5, num_trials=100, discard_first=1,
                                                 timing_method="cuda_event", use_torch_compile=False,
                                                 device=torch.device("cuda:0"), precision=a.precision)
            if not kb:
                rows.append({"level": level, "name": name, "farm_ms": stats["mean"], "kernelbench_ms": None})
                show(rows[-1])
                continue
            ratio = stats["mean"] / kb["mean"]
            rows.append({"level": level, "name": name, "farm_ms": stats["mean"], "kernelbench_ms": kb["mean"],
                         "ratio": ratio, "within": abs(ratio - 1) <= a.tolerance})
            show(rows[-1])
    timed = [r for r in rows if "ratio" in r]
    within = sum(1 for r in timed if r["within"])
    med = statistics.median(abs(r["ratio"] - 1) for r in timed) if timed else float("nan")
    print(f"{within} of {len(timed)} problems within {100 * a.tolerance:.0f}% of KernelBench's own timing "
          f"(median |ratio - 1| = {100 * med:.2f}%); {len(rows) - len(timed)} not timed by KernelBench; "
          f"GPU {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    if a.json:
        json.dump({"rows": rows, "within": within, "timed": len(timed), "tolerance": a.tolerance}, open(a.json, "w"),
                  indent=1)


if __name__ == "__main__":
    main()
