"""Verify a model with the farm's tuned kernels plugged in: outputs, greedy decoding, end-to-end time.

  python3 models/verify_model.py --model examples/gpt2 --device cuda --dtype bf16 --out verify.json
      --manifest plug.json --ops-lib libautokernel_ops.so [--profile profile.json] [--iters 20]
      [--warmup 5] [--decode-tokens 32] [--no-compile] [--seed 0]

In one process on one device, with the same weights and inputs (models/README.md, "Verify"):
  1. outputs: the original model in the run's dtype (eager), the same model with the tuned kernels
     (models/plug.py), and the same weights computed in fp32 as the reference. The tuned model
     passes when its error against the reference is at most twice the original's plus one unit of
     the dtype's tolerance: rounding that accumulates over layers is allowed exactly as much as the
     original model accumulates, and no more (errors are max |a - ref| / max |ref|).
  2. greedy decoding, for a language model (one integer input [B, S], output [B, S, V]): 32 tokens
     from the original and from the tuned model, each step the argmax of the last position over a
     window of the last S tokens (the shapes the kernels were tuned for); token-identical or the
     first position where they part, with the original's margin between its two best logits there.
     Then the tuned model along the original's tokens (each window the original's): every step's
     choice must be the original's, or another token that ties with it exactly for the original's
     best logit (a tie in the dtype, which any change of rounding may break either way).
  3. time: eager, torch.compile (unless --no-compile) and the tuned model, interleaved round by
     round, each forward timed alone (CUDA events after a synchronize; on the CPU the wall clock),
     medians with p10 and p90.
     On CUDA also the device time of eager and tuned: each forward captured in a CUDA graph and
     replayed, so the host's launches are out of the figure ("graph_time").
  4. the Amdahl prediction from the profile's shares and the tuned kernels' speedups,
     1 / (1 - sum f (1 - 1/s)) over the targets whose kernel was used, beside the measured speedup.

Exit codes: 0 verified; 2 bad arguments; 3 the model cannot be loaded; 4 out of GPU memory; 5 it
raised while running; 6 the tuned model's outputs are wrong or its kernels could not be loaded
(the reason is the last line of stderr and the report's "error").
"""
import argparse
import contextlib
import copy
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import model_loader  # noqa: E402
import plug  # noqa: E402

# One unit of each dtype's tolerance: the kernels' own rtol (kernels/<type>/spec.cc).
DTYPE_TOL = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1.6e-2}


def _tensors(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in _tensors(o)]
    if hasattr(out, "to_tuple"):
        return _tensors(out.to_tuple())
    return []


def _error(got, ref):
    """max |got - ref| / max |ref| over every floating output, NaN-aware."""
    worst = 0.0
    for g, r in zip(_tensors(got), _tensors(ref)):
        if not g.is_floating_point():
            continue
        g, r = g.double(), r.double()
        if g.shape != r.shape:
            return float("inf")
        if not torch.isfinite(g).all() and torch.isfinite(r).all():
            return float("inf")
        scale = r.abs().max().item() or 1.0
        worst = max(worst, (g - r).abs().max().item() / scale)
    return worst


def _is_language_model(inputs, out):
    t = _tensors(out)
    return (len(inputs) == 1 and isinstance(inputs[0], torch.Tensor) and not inputs[0].is_floating_point()
            and inputs[0].dim() == 2 and len(t) == 1 and t[0].dim() == 3 and t[0].shape[:2] == inputs[0].shape)


def _decode(model, ids, tokens, follow=None):
    """Greedy decoding over a window of ids' length; the tokens, each step's top-2 margin, each
    step's set of tokens that reach the best logit (more than one: a tie), and each step's logits
    (batch x vocabulary, float, on the CPU). With `follow` (another run's tokens, one step each) the
    window takes those instead of this run's own choices."""
    window = ids.clone()
    out, margins, best, steps = [], [], [], []
    for i in range(len(follow) if follow is not None else tokens):
        logits = _tensors(model(window))[0][:, -1].float()
        top = logits.topk(2, dim=-1)
        nxt = top.indices[:, :1]
        out.append(nxt[:, 0].tolist())
        margins.append((top.values[:, 0] - top.values[:, 1]).min().item())
        best.append([set((row == row.max()).nonzero()[:, 0].tolist()) for row in logits])
        steps.append(logits.cpu())
        if follow is not None:
            nxt = torch.tensor(follow[i], device=window.device)[:, None]
        window = torch.cat([window[:, 1:], nxt.to(window.dtype)], dim=1)
    return out, margins, best, steps


def compare_decoding(want, margins, best, got, forced, logits=None, tolerance=None):
    """The decode report: the original's tokens (want, with each step's top-2 margin, its set of
    best tokens and, optionally, its logits), the tuned model's free run (got) and its choices along
    the original's tokens (forced); each a list of steps, a step a list over the batch.

    Along the original's tokens a choice that differs is a tie when it reaches the original's best
    logit exactly; with `logits` and `tolerance` (the outputs' bound: max |error| / max |logit|), a
    near tie when the original's own gap between its best logit and the tuned model's choice,
    relative to that step's largest |logit|, is within the tolerance: an error the outputs' check
    accepts can flip it. Anything else is a real difference. `largest_gap` is the largest among the
    near ties; each entry of `gaps` says whether it was one."""
    first = next((i for i, (x, y) in enumerate(zip(want, got)) if x != y), None)
    agree = ties = near = 0
    differ, gaps = [], []
    for i, step in enumerate(forced):
        for b, t in enumerate(step):
            if t == want[i][b]:
                agree += 1
                continue
            if t in best[i][b]:
                ties += 1
                continue
            gap = None
            if logits is not None:
                row = logits[i][b]
                gap = float(row[want[i][b]] - row[t]) / (float(row.abs().max()) or 1.0)
            is_near = gap is not None and tolerance is not None and gap <= tolerance
            if gap is not None:
                gaps.append({"token": i, "batch": b, "gap": gap, "near": is_near})
            if is_near:
                near += 1
            elif not differ or differ[-1] != i:
                differ.append(i)
    return {"tokens": len(want), "identical": first is None, "first_difference": first, "original": want,
            "tuned": got, "margin_at_difference": margins[first] if first is not None else None,
            "smallest_margin": min(margins) if margins else None,
            "forced": {"tuned": forced, "agree": agree, "ties": ties, "near_ties": near, "tolerance": tolerance,
                       "gaps": gaps, "largest_gap": max((g["gap"] for g in gaps if g["near"]), default=None),
                       "first_difference": differ[0] if differ else None, "identical_but_ties": not differ}}


class Timer:
    def __init__(self, device):
        self.cuda = device.startswith("cuda")

    def __call__(self, fn):
        if self.cuda:
            torch.cuda.synchronize()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            return start.elapsed_time(stop) * 1000.0
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6


def _stats(samples):
    s = sorted(samples)
    q = lambda p: s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))]  # noqa: E731
    return {"median_us": statistics.median(s), "p10_us": q(0.1), "p90_us": q(0.9), "samples": len(s)}


def _prediction(profile, p, used):
    """Amdahl over the targets whose tuned kernel ran: (prediction, rows)."""
    if not profile.get("targets"):
        return None, []
    targets = {(t["kernel_type"], tuple(t["shape"]), t["dtype"]): t for t in profile["targets"]}
    rows, gain = [], 0.0
    for e in p.entries:
        key = (e["kernel_type"], tuple(e["shape"]), e["dtype"])
        if key not in used:
            continue
        f = float(targets[key]["share"]) if key in targets else None
        s = e.get("speedup")
        rows.append({"kernel_type": key[0], "shape": list(key[1]), "dtype": key[2], "share": f, "speedup": s})
        if f is not None and s:
            gain += f * (1.0 - 1.0 / float(s))
    return (1.0 / (1.0 - gain) if gain < 1.0 else None), rows


def table(r):
    lines = [f"{r['model']} on {r.get('gpu', r['device'])}, {r['dtype']}: "
             f"outputs {'match' if r['outputs']['pass'] else 'DIFFER'} (error {r['outputs']['tuned_error']:.3g}, "
             f"original {r['outputs']['original_error']:.3g}, limit {r['outputs']['limit']:.3g})"]
    d = r.get("decode")
    if d:
        line = (f"greedy decoding: {d['tokens']} tokens " +
                ("identical" if d["identical"] else f"part at token {d['first_difference']} "
                 f"(original's margin there {d['margin_at_difference']:.3g})"))
        f = d.get("forced")
        if f and not d["identical"]:
            line += (f"; along the original's tokens {f['agree']} agree, {f['ties']} differ only at an exact tie "
                     "of the original's best logits" +
                     (f", {f['near_ties']} where the original's gap to the tuned choice is within the outputs' "
                      f"tolerance (largest {f['largest_gap']:.3g} of the step's largest logit; tolerance "
                      f"{f['tolerance']:.3g})" if f.get("near_ties") else "") +
                     ("" if f["identical_but_ties"] else f", and they part for real at token {f['first_difference']}"))
        lines.append(line)
    t = r["time"]
    lines.append(f"{'variant':<10} {'median us':>12} {'p10':>10} {'p90':>10} {'speedup':>8}")
    for name in ("eager", "compile", "tuned"):
        if name in t:
            lines.append(f"{name:<10} {t[name]['median_us']:>12.1f} {t[name]['p10_us']:>10.1f} "
                         f"{t[name]['p90_us']:>10.1f} {t['eager']['median_us'] / t[name]['median_us']:>7.3f}x")
    g = r.get("graph_time", {})
    if "speedup" in g:
        lines.append(f"device time (CUDA graphs): eager {g['eager']['median_us']:.1f} us, tuned "
                     f"{g['tuned']['median_us']:.1f} us, {g['speedup']:.3f}x")
    if r.get("predicted_speedup"):
        lines.append(f"predicted (Amdahl) {r['predicted_speedup']:.3f}x, measured {r['speedup_vs_eager']:.3f}x "
                     f"against eager")
    lines.append(f"replaced: {sum(x['calls_per_forward'] for x in r['replaced'])} calls per forward in "
                 f"{len(r['replaced'])} (function, kernel, shape) groups")
    for x in r["replaced"]:
        lines.append(f"  {x['function']:<32} {x['kernel_type']:<22} {str(x['shape']):<24} x{x['calls_per_forward']}")
    for x in r["fallbacks"][:10]:
        lines.append(f"  fallback {x['function']:<23} {x['reason']} x{x['calls_per_forward']}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    model_loader.add_step_arguments(ap)
    ap.add_argument("--manifest", required=True, help="the tuned kernels (models/plug/ops.cc)")
    ap.add_argument("--ops-lib", required=True, help="libautokernel_ops.so")
    ap.add_argument("--profile", help="the model's profile (autokernel profile --json), for the prediction")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--decode-tokens", type=int, default=32)
    ap.add_argument("--no-compile", action="store_true", help="do not time torch.compile")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.iters < 1 or a.warmup < 0 or a.decode_tokens < 0:
        ap.error("--iters must be at least 1, --warmup and --decode-tokens at least 0")
    report = {"model": a.model, "device": a.device, "dtype": a.dtype, "mode": "verify", "torch": torch.__version__,
              "iters": a.iters, "warmup": a.warmup}
    if a.device.startswith("cuda"):
        if not torch.cuda.is_available():
            return model_loader.fail(a.out, report, 3, f"device {a.device} requested but CUDA is not available here")
        report["gpu"] = torch.cuda.get_device_name(torch.device(a.device))
    profile = {}
    if a.profile:
        try:
            with open(a.profile) as f:
                profile = json.load(f)
        except (OSError, ValueError) as e:
            ap.error(f"--profile {a.profile}: {e}")

    torch.manual_seed(a.seed)
    try:
        model, inputs, label = model_loader.load(a.model, a.device, a.dtype)
        report["model"] = label
    except model_loader.ModelError as e:
        return model_loader.fail(a.out, report, 3, str(e))
    except Exception as e:
        return model_loader.fail(a.out, report, 3, f"{a.model} cannot be built: " + model_loader.describe(e))
    try:
        p = plug.Plug(a.manifest, a.ops_lib).attach(model)
    except Exception as e:  # the farm's own files: a bad manifest or library is a verify failure
        return model_loader.fail(a.out, report, 6, "cannot load the tuned kernels: " + model_loader.describe(e))
    report["kernels"] = [{k: e.get(k) for k in ("kernel_type", "shape", "dtype", "backend", "config", "speedup",
                                                "latency_us", "baseline_us")} for e in p.entries]
    try:
        with torch.inference_mode():
            report.update(_run(a, model, inputs, p, profile))
    except torch.cuda.OutOfMemoryError as e:
        return model_loader.fail(a.out, report, 4, f"{report['model']}: " + model_loader.describe(e))
    except Exception as e:
        return model_loader.fail(a.out, report, 5, f"{report['model']} raised while running: " + model_loader.describe(e))
    model_loader.write_report(a.out, report)
    print(table(report))
    if not report["outputs"]["pass"]:
        print(f"{report['model']}: the tuned model's outputs differ from the reference: error "
              f"{report['outputs']['tuned_error']:.3g} against the original's {report['outputs']['original_error']:.3g} "
              f"(limit {report['outputs']['limit']:.3g})", file=sys.stderr)
        return 6
    return 0


def _run(a, model, inputs, p, profile):
    r = {}
    # 1. outputs
    reference_model = copy.deepcopy(model).float()
    ref = reference_model(*model_loader.cast(inputs, a.device, torch.float32))
    del reference_model
    original = model(*inputs)
    p.reset_counts()
    with p:
        tuned = model(*inputs)
    replaced, fallbacks = dict(p.replaced), dict(p.fallbacks)
    e_orig, e_tuned = _error(original, ref), _error(tuned, ref)
    limit = 2.0 * e_orig + DTYPE_TOL[a.dtype]
    r["outputs"] = {"original_error": e_orig, "tuned_error": e_tuned, "limit": limit, "pass": e_tuned <= limit,
                    "metric": "max |out - ref| / max |ref|, ref = the same weights in fp32"}
    r["replaced"] = [{"function": f, "kernel_type": k, "shape": list(s), "dtype": d, "calls_per_forward": n}
                     for (f, k, s, d), n in sorted(replaced.items(), key=lambda x: -x[1])]
    r["fallbacks"] = [{"function": f, "reason": why, "calls_per_forward": n}
                      for (f, why), n in sorted(fallbacks.items(), key=lambda x: -x[1])]
    used = {(k, s, d) for (_, k, s, d) in replaced}
    # 2. greedy decoding
    if a.decode_tokens and _is_language_model(inputs, original):
        ids = inputs[0]
        want, margins, best, steps = _decode(model, ids, a.decode_tokens)
        with p:
            got = _decode(model, ids, a.decode_tokens)[0]
            # Along the original's tokens: once the two runs part, free decoding compares different
            # windows. A step where the original's best logit is reached by two tokens (an exact tie
            # in the dtype), or by one within the outputs' tolerance of it, may go either way with
            # an error the outputs' check accepts; every other step must agree.
            forced = _decode(model, ids, a.decode_tokens, follow=want)[0]
        r["decode"] = compare_decoding(want, margins, best, got, forced, logits=steps, tolerance=limit)
        r["decode"]["window"] = int(ids.shape[1])
    # 3. time
    timer = Timer(a.device)
    # Each variant: its forward and the context it runs in. The tuned one is the model's forward with
    # the plug installed; installing it (a few hundred attribute swaps) happens outside the timed
    # region, as a user's model would install it once.
    variants = {"eager": (lambda: model(*inputs), contextlib.nullcontext)}
    if not a.no_compile:
        compiled = torch.compile(model)
        variants["compile"] = (lambda: compiled(*inputs), contextlib.nullcontext)
    variants["tuned"] = (lambda: model(*inputs), lambda: p)
    samples = {k: [] for k in variants}
    for _ in range(a.warmup):
        for fn, context in variants.values():
            with context():
                fn()
    for _ in range(a.iters):
        for k, (fn, context) in variants.items():
            with context():
                samples[k].append(timer(fn))
    r["time"] = {k: _stats(v) for k, v in samples.items()}
    r["time"]["protocol"] = (f"{a.warmup} warm-up rounds, then {a.iters} rounds of one forward per variant "
                             "(interleaved), each timed alone, the plug installed outside the timed region; medians")
    eager = r["time"]["eager"]["median_us"]
    r["speedup_vs_eager"] = eager / r["time"]["tuned"]["median_us"]
    if "compile" in r["time"]:
        r["speedup_vs_compile"] = r["time"]["compile"]["median_us"] / r["time"]["tuned"]["median_us"]
    if timer.cuda:
        r["graph_time"] = _graph_times(model, inputs, p, a)
    pred, rows = _prediction(profile, p, used)
    r["predicted_speedup"] = pred
    r["prediction"] = rows
    return r


def _graph_times(model, inputs, p, a):
    """Device time of one forward, eager and tuned: each captured once in a CUDA graph and replayed,
    so the host's launches are out of the figure (a forward at batch 1 is often bound by them).
    The tuned kernels launch on PyTorch's current stream and are captured with the rest."""
    out = {}
    for name in ("eager", "tuned"):
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.stream(stream):
                if name == "tuned":
                    with p:
                        model(*inputs)  # fills the weight cache outside the capture
                        with torch.cuda.graph(graph, stream=stream):
                            model(*inputs)
                else:
                    model(*inputs)
                    with torch.cuda.graph(graph, stream=stream):
                        model(*inputs)
            torch.cuda.current_stream().wait_stream(stream)
            timer = Timer(a.device)
            for _ in range(a.warmup):
                graph.replay()
            out[name] = _stats([timer(graph.replay) for _ in range(a.iters)])
            del graph
        except Exception as e:  # a model that cannot be captured (host syncs, dynamic shapes)
            out[name] = {"error": model_loader.describe(e)}
    if "median_us" in out.get("eager", {}) and "median_us" in out.get("tuned", {}):
        out["speedup"] = out["eager"]["median_us"] / out["tuned"]["median_us"]
    out["protocol"] = ("each variant's forward captured once in a CUDA graph, then replayed: "
                       f"{a.warmup} warm-up replays, {a.iters} timed alone; medians")
    return out


if __name__ == "__main__":
    sys.exit(main())
