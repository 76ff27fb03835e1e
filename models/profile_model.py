"""Profile a model: device time per op, each kernel counted once, classified into kernel types.

  python3 models/profile_model.py --model examples/gpt2 --device cuda --dtype bf16 --out profile.json
      [--iters 5] [--warmup 3] [--compile] [--ceilings FILE | --peak-tflops T --peak-gbps G] [--seed 0]

--ceilings reads the worker's measured ceilings (`autokernel calibrate --json`): the copy bandwidth
and the GEMM rate of the run's dtype, the roofline by which each op is memory- or compute-bound.

Writes the profile (models/README.md, "The profile") to --out and prints a ranked table. Exit codes:
0 done; 2 bad arguments; 3 the model cannot be loaded (ModelError: raised on import, no entry
points, ...); 4 it ran out of GPU memory; 5 it raised while running. For 3-5 the reason is the
last line of stderr and the "error" field of --out.

How time is attributed. On CUDA, every device activity (kernel, memcpy, memset) in the profiler's
own list is taken once and credited to the CPU event that launched it (_device_activities): an
op's own time is the sum of its activities, never its children's. That time is then credited to
one op of the launching op's ancestry: the outermost "ak::<type>" region (a hint,
models/classify.py), else the outermost ATen op that classifies into a kernel type (so
aten::linear, not the aten::addmm under it), else the outermost ATen op (kernel type "other").
On the CPU, an op's own time is its self CPU time, credited the same way. The total is measured
independently (the sum of all device activities; on the CPU the inclusive time of the top-level
ops), and what no op claims is reported as unattributed.
"""
import argparse
import json
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch.autograd import DeviceType  # noqa: E402
from torch.autograd.profiler_util import _filter_name, _rewrite_name  # noqa: E402

import classify  # noqa: E402
import model_loader  # noqa: E402

_RUNTIME_CALL = re.compile(r"cu(da)?[A-Z]")  # CUPTI's names of runtime and driver API calls
MAX_OPS = 400  # rows of "ops"; the rest are summed into the last
_DTYPE_NAMES = {"float": "fp32", "c10::Half": "fp16", "c10::BFloat16": "bf16", "Half": "fp16", "BFloat16": "bf16"}


def _dtype_of(kineto_dtypes, default):
    for d in kineto_dtypes or []:
        if d in _DTYPE_NAMES:
            return _DTYPE_NAMES[d]
    return default


def _is_op(e):
    return e.device_type == DeviceType.CPU and e.name.startswith("aten::") and not e.is_async


def _is_annotation(e):
    return bool(getattr(e, "is_user_annotation", False)) or e.name.startswith("ak::")


def _hint(e):
    if e.device_type == DeviceType.CPU and e.name.startswith("ak::"):
        t = e.name[4:]
        return t if t in classify.HINTS else None
    return None


def _chain(e):
    out = []
    while e is not None:
        out.append(e)
        e = e.cpu_parent
    return out  # innermost first


def _first_op_shapes(region):
    ops = []

    def walk(e):
        for c in e.cpu_children:
            if _is_op(c) and c.input_shapes:
                ops.append(c)
            else:
                walk(c)

    walk(region)
    ops.sort(key=lambda c: c.time_range.start)
    return ops[0].input_shapes if ops else None


def _work_shapes(region, op):
    """The input shapes that say which tensor op works on: its own, or where they hold no 4-d
    tensor (aten::cat records its list as empty) those of the last op of the region before it that
    does (rotate_half's neg before its cat)."""
    if classify.tensors_4d(op.input_shapes):
        return op.input_shapes
    before = []

    def walk(e):
        for c in e.cpu_children:
            if _is_op(c) and c is not op and c.time_range.start <= op.time_range.start \
                    and classify.tensors_4d(c.input_shapes):
                before.append(c)
            walk(c)

    walk(region)
    return max(before, key=lambda c: c.time_range.start).input_shapes if before else op.input_shapes


class Attribution:
    """Where each event's own time is credited: (op name, kernel type, shape, layout, anchor)."""

    def __init__(self, run_dtype, dtypes_by_id):
        self.run_dtype = run_dtype
        self.dtypes_by_id = dtypes_by_id

    def of(self, e):
        chain = _chain(e)
        hints = [c for c in chain if _hint(c)]
        if hints:
            region = hints[-1]
            t = _hint(region)
            inner = [c for c in chain[:chain.index(region)] if _is_op(c)]
            shape = classify.hint_shape(t, _first_op_shapes(region), _work_shapes(region, inner[0]) if inner else None)
            if shape:
                return region, region.name, t, shape, {}, self.run_dtype
        ops = [c for c in chain if _is_op(c)]
        for c in reversed(ops):  # outermost first
            got = classify.classify(c.name, c.input_shapes, c.concrete_inputs)
            if got:
                dtype = _dtype_of(self.dtypes_by_id.get(c.id), self.run_dtype)
                return c, c.name, got[0], got[1], got[2], dtype
        anchor = ops[-1] if ops else e
        return anchor, anchor.name, "other", [], {}, self.run_dtype


def _device_activities(prof, events, kineto):
    """[(CPU event, [(activity name, us)])]: each device activity of the profiler's list once, under
    the CPU event that launched it; activities with no such event are left out (unattributed).

    An activity names its launching op by the op's correlation id, but ids are not unique among
    CPU events: a CUDA runtime call made outside any op (torch.cuda.synchronize) carries CUPTI's
    own id, which can equal an op's, and FunctionEvent.kernels then credits the op's activities to
    both (pytorch/pytorch#196282, after torch 2.11). That is the likely cause of what the H200 showed
    on 2026-12-06 with those lists: per-op times of hf:bert and of a small CNN summing to 1.06% and
    4.5% over the device total. Here the launcher is the event of that id whose time range holds the
    activity's launch call (the runtime event of the activity's own CUPTI id), the innermost if
    several do. Every activity the total counts is taken as listed, so the two stay comparable.
    kineto: the profiler's kineto events, as a list."""
    trace0 = prof.profiler.kineto_results.trace_start_ns()
    launch_us = {k.correlation_id(): (k.start_ns() - trace0) / 1000.0 for k in kineto
                 if k.device_type() == DeviceType.CPU and k.linked_correlation_id() > 0}
    ops = [e for e in events if _is_op(e)]
    by_id = defaultdict(list)
    for e in events:
        if e.device_type == DeviceType.CPU and not e.is_async and e.id > 0:
            by_id[e.id].append(e)
    by_event = {}  # id(event): (event, activities)
    for k in kineto:
        if k.device_type() != DeviceType.CUDA or k.is_user_annotation() or k.name().startswith("ak::") \
                or _filter_name(k.name()) or k.is_hidden_event():  # what torch leaves out of its events
            continue
        t = launch_us.get(k.correlation_id())
        # A CUDA runtime or driver call (cudaLaunchKernel, cuLaunchKernel) is never the launcher:
        # the op or region around it is. Among those of the activity's id, the one holding its launch.
        candidates = [e for e in by_id.get(k.linked_correlation_id(), []) if not _RUNTIME_CALL.match(e.name)]
        if t is not None:
            holding = [e for e in candidates if e.time_range.start <= t <= e.time_range.end]
            if not candidates:
                # torch drops an op nested in one of its own name as its parent's only child (the
                # parent takes its kernels): the ops around the launch, as in one thread's forward
                holding = [e for e in ops if e.time_range.start <= t <= e.time_range.end]
            candidates = holding or candidates
        if not candidates:
            continue
        launcher = max(candidates, key=lambda e: len(_chain(e)))
        activity = (_rewrite_name(k.name(), with_wildcard=True), (k.end_ns() - k.start_ns()) / 1000.0)
        by_event.setdefault(id(launcher), (launcher, []))[1].append(activity)
    return list(by_event.values())


def profile(model, inputs, device, run_dtype, iters, warmup):
    cuda = device.startswith("cuda")
    with torch.inference_mode():
        for _ in range(warmup):
            model(*inputs)
        if cuda:
            torch.cuda.synchronize()
        activities = [torch.profiler.ProfilerActivity.CPU]
        if cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
            for _ in range(iters):
                model(*inputs)
            if cuda:
                torch.cuda.synchronize()
    kineto = list(prof.profiler.kineto_results.events())  # read once: a long run has many
    dtypes_by_id = {}
    try:
        for k in kineto:
            # ops only (no linked id): a runtime call can carry an op's id (_device_activities)
            if k.device_type() == DeviceType.CPU and k.linked_correlation_id() == 0 and k.dtypes():
                dtypes_by_id.setdefault(k.correlation_id(), list(k.dtypes()))
    except Exception:  # older or newer profilers without per-event dtypes: the run's dtype
        pass
    events = prof.events()
    attribution = Attribution(run_dtype, dtypes_by_id)
    groups = {}
    anchors_seen = defaultdict(set)
    attributed = 0.0
    if cuda:
        # A record_function region also appears on the device, as one span from its first kernel's
        # start to its last one's end (gaps included): not an activity of its own.
        total = sum(e.time_range.elapsed_us() for e in events
                    if e.device_type == DeviceType.CUDA and not _is_annotation(e))
        holders = _device_activities(prof, events, kineto)
    else:
        tops = [e for e in events if _is_op(e) and not any(_is_op(a) for a in _chain(e)[1:])]
        total = float(sum(e.cpu_time_total for e in tops))
        holders = [(e, [(e.name, float(e.self_cpu_time_total))])
                   for e in events if _is_op(e) and e.self_cpu_time_total > 0]
    claimed = defaultdict(float)
    for e, kernels in holders:
        anchor, op, ktype, shape, layout, dtype = attribution.of(e)
        key = (op, ktype, tuple(shape), json.dumps(layout, sort_keys=True), dtype)
        g = groups.setdefault(key, {"op": op, "kernel_type": ktype, "shape": list(shape), "layout": layout,
                                    "dtype": dtype, "calls": 0, "us": 0.0, "kernels": defaultdict(float)})
        if anchor.id not in anchors_seen[key]:
            anchors_seen[key].add(anchor.id)
            g["calls"] += 1
        for name, us in kernels:
            g["us"] += us
            g["kernels"][name] += us
            claimed[name] += us
            attributed += us
    # The device activities no op claims, by name: what the unattributed time is made of.
    missing = defaultdict(float)
    if cuda:
        for e in events:
            if e.device_type == DeviceType.CUDA and not _is_annotation(e):
                missing[e.name] += e.time_range.elapsed_us()
        for name, us in claimed.items():
            missing[name] -= us
    return groups, total, attributed, {n: us for n, us in missing.items() if us > 0.5}


def summarize(groups, total, attributed, iters, peak_tflops, peak_gbps, missing=None):
    ops = []
    for g in groups.values():
        us = g["us"] / iters
        fb = classify.flops_bytes(g["kernel_type"], g["shape"], g["dtype"])
        bound = "-"
        if fb and peak_tflops and peak_gbps and fb[1] > 0:
            ridge = peak_tflops * 1e12 / (peak_gbps * 1e9)  # FLOP per byte where the two ceilings meet
            bound = "compute" if fb[0] / fb[1] >= ridge else "memory"
        kernels = sorted(g["kernels"].items(), key=lambda kv: -kv[1])
        ops.append({"op": g["op"], "kernel_type": g["kernel_type"], "shape": g["shape"], "layout": g["layout"],
                    "dtype": g["dtype"], "calls_per_iter": g["calls"] / iters, "us_per_iter": us,
                    "share": (g["us"] / total) if total > 0 else 0.0, "bound": bound,
                    "flops_per_call": fb[0] if fb else None, "bytes_per_call": fb[1] if fb else None,
                    "kernels": [{"name": n, "us_per_iter": v / iters} for n, v in kernels[:8]]})
    ops.sort(key=lambda o: -o["us_per_iter"])
    if len(ops) > MAX_OPS:
        # A result travels in one frame (4 MiB at most): the smallest ops are summed into one row.
        rest = ops[MAX_OPS - 1:]
        ops = ops[:MAX_OPS - 1] + [{
            "op": f"({len(rest)} smaller ops)", "kernel_type": "other", "shape": [], "layout": {},
            "dtype": rest[0]["dtype"], "calls_per_iter": sum(o["calls_per_iter"] for o in rest),
            "us_per_iter": sum(o["us_per_iter"] for o in rest), "share": sum(o["share"] for o in rest),
            "bound": "-", "flops_per_call": None, "bytes_per_call": None, "kernels": []}]
    targets = {}
    uncovered = {}
    for o in ops:
        if o["kernel_type"] == "other":
            u = uncovered.setdefault(o["op"], {"op": o["op"], "us_per_iter": 0.0, "share": 0.0})
            u["us_per_iter"] += o["us_per_iter"]
            u["share"] += o["share"]
            continue
        key = (o["kernel_type"], tuple(o["shape"]), o["dtype"], json.dumps(o["layout"], sort_keys=True))
        t = targets.setdefault(key, {"kernel_type": o["kernel_type"], "shape": o["shape"], "dtype": o["dtype"],
                                     "layout": o["layout"], "ops": [], "us_per_iter": 0.0, "share": 0.0,
                                     "bound": o["bound"]})
        t["ops"].append(o["op"])
        t["us_per_iter"] += o["us_per_iter"]
        t["share"] += o["share"]
    unattributed = max(0.0, total - attributed)
    return {
        "total_us_per_iter": total / iters,
        "attributed_us_per_iter": attributed / iters,
        "unattributed_us_per_iter": unattributed / iters,
        "ops": ops,
        "targets": sorted(targets.values(), key=lambda t: -t["us_per_iter"]),
        "uncovered": sorted(uncovered.values(), key=lambda u: -u["us_per_iter"]),
        "unattributed_kernels": [{"name": n, "us_per_iter": us / iters}
                                 for n, us in sorted((missing or {}).items(), key=lambda kv: -kv[1])[:8]],
    }


def table(report, top=25):
    lines = [f"{'share':>6}  {'us/iter':>10}  {'calls':>5}  {'type':<22} {'bound':<7} {'dtype':<5} op and shape"]
    for o in report["ops"][:top]:
        shape = "x".join(str(d) for d in o["shape"]) or "-"
        layout = "".join(f" {k}={v}" for k, v in sorted(o["layout"].items()))
        lines.append(f"{100 * o['share']:5.1f}%  {o['us_per_iter']:10.1f}  {o['calls_per_iter']:5.0f}  "
                     f"{o['kernel_type']:<22} {o['bound']:<7} {o['dtype']:<5} {o['op']} {shape}{layout}")
    covered = sum(t["share"] for t in report["targets"])
    lines.append(f"total {report['total_us_per_iter']:.1f} us per iteration; {len(report['targets'])} targets cover "
                 f"{100 * covered:.1f}%; unattributed {report['unattributed_us_per_iter']:.1f} us")
    for k in report.get("unattributed_kernels", []):
        lines.append(f"  unattributed {k['us_per_iter']:10.1f} us/iter  {k['name'][:120]}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    model_loader.add_step_arguments(ap)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--compile", action="store_true", help="profile torch.compile(model) instead of eager")
    ap.add_argument("--peak-tflops", type=float, default=0.0)
    ap.add_argument("--peak-gbps", type=float, default=0.0)
    ap.add_argument("--ceilings", help="`autokernel calibrate --json` output: the roofline's two ceilings")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.ceilings:
        try:
            with open(a.ceilings) as f:
                c = json.load(f)["ceilings"]
            a.peak_gbps = float(c["copy_bandwidth_gbps"])
            a.peak_tflops = float(c["gemm_tflops"][a.dtype])
        except (OSError, ValueError, KeyError, TypeError) as e:
            ap.error(f"--ceilings {a.ceilings}: expected `autokernel calibrate --json` output with the copy "
                     f"bandwidth and a {a.dtype} GEMM rate ({type(e).__name__}: {e})")
    if a.iters < 1 or a.warmup < 0:
        ap.error("--iters must be at least 1 and --warmup at least 0")
    report = {"model": a.model, "device": a.device, "dtype": a.dtype, "mode": "compile" if a.compile else "eager",
              "iters": a.iters, "warmup": a.warmup, "torch": torch.__version__,
              "ceilings": {"tflops": a.peak_tflops, "gbps": a.peak_gbps}}
    if a.device.startswith("cuda"):
        if not torch.cuda.is_available():
            return model_loader.fail(a.out, report, 3, f"device {a.device} requested but CUDA is not available here")
        report["gpu"] = torch.cuda.get_device_name(torch.device(a.device))

    torch.manual_seed(a.seed)
    try:
        model, inputs, label = model_loader.load(a.model, a.device, a.dtype)
        report["model"] = label
        report["parameters"] = sum(p.numel() for p in model.parameters())
        if a.compile:
            model = torch.compile(model)
        groups, total, attributed, missing = profile(model, inputs, a.device, a.dtype, a.iters, a.warmup)
    except model_loader.ModelError as e:
        return model_loader.fail(a.out, report, 3, str(e))
    except torch.cuda.OutOfMemoryError as e:
        return model_loader.fail(a.out, report, 4, f"{report['model']}: " + model_loader.describe(e))
    except Exception as e:
        return model_loader.fail(a.out, report, 5, f"{report['model']} raised while running: " + model_loader.describe(e))
    report.update(summarize(groups, total, attributed, a.iters, a.peak_tflops, a.peak_gbps, missing))
    if a.compile and not a.device.startswith("cuda"):
        # Inductor's generated C++ kernels are neither ATen ops nor recorded: only the ATen ops left
        # in the compiled graph (extern kernels such as mm and attention) are seen and counted.
        report["note"] = ("torch.compile on the CPU: inductor's generated kernels are invisible to the profiler; "
                          "the profile covers the ATen ops left in the graph only")
    model_loader.write_report(a.out, report)
    print(table(report))
    if "note" in report:
        print("note: " + report["note"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
