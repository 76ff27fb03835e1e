"""The reference, baseline and judge modes (HARNESS.md, "Modes"); candidate mode is candidate.py."""

import importlib
import time
import traceback

import torch

from . import pinned
from .compare import clone_all, compare_judge, save_atomic, to_saveable
from .gpu_lock import COMPILER_MODULES, compile_off_turn
from .problem import build_reference, cast_baseline, inputs_for, load_problem, outputs_meta, timer_name
from .request import HARNESS_VERSION, ProblemError
from .timing import (LIVE_CLOCK, get_error_name, hardware_name, set_seed, synchronize, time_calls, timing_stats,
                     trial_seeds_for)


def run_reference(req):
    """The reference outputs, computed in a process that never loads candidate code."""
    device = req["device_obj"]
    try:
        loaded = load_problem(req["problem_path"])
        get_inputs = loaded[4]
        model, _ = build_reference(req, loaded)
        req["lock"].enter("shared")  # to the end: this process measures nothing
        model = model.to(device=device, dtype=req["dtype"])
        trial_seeds = trial_seeds_for(req["seed"], req["num_correct_trials"])
        rotation_seeds = [req["seed"] + 1 + r for r in range(req["rotations"])]
        saved = {"format": HARNESS_VERSION, "kind": "reference", "meta": outputs_meta(req),
                 "trial_seeds": trial_seeds, "rotation_seeds": rotation_seeds,
                 "outputs": [], "rotation_outputs": [], "input_checksums": [], "rotation_input_checksums": []}
        with torch.no_grad():
            for key, seeds in (("outputs", trial_seeds), ("rotation_outputs", rotation_seeds)):
                for s in seeds:
                    inputs = inputs_for(s, get_inputs, req,
                                         saved["input_checksums" if key == "outputs" else "rotation_input_checksums"])
                    set_seed(s)
                    out = model(*clone_all(inputs))
                    synchronize(device)
                    saved[key].append(to_saveable(out, sample=True))
        save_atomic(req["reference_outputs"], saved)
        return {"ok": True, "trials": len(trial_seeds), "rotations": len(rotation_seeds),
                "trial_seeds": trial_seeds, "reference_outputs": req["reference_outputs"],
                "device": str(device), "precision": req["precision"], "switches": req["switches"]}
    except BaseException as e:  # noqa: B036
        return {"ok": False, "error": f"{get_error_name(e)}: {e}", "traceback": traceback.format_exc()[-4000:]}


def run_baseline(req):
    """KernelBench measure_ref_program_time (eager or torch.compile). The result's "phases_s" says
    where the process's time went, in seconds: start (importing torch), load (the problem file,
    and for torch.compile its dynamo and inductor modules),
    inputs (get_inputs and get_init_inputs), shared_wait, build (moving to the device, Model()),
    compile (torch.compile's first call, made apart only with a lock, dynamo and inductor with no
    turn held and the compiled code's first run in a shared turn, compile_off_turn: without a lock
    the first warm-up compiles, as in KernelBench, and counts in timed), exclusive_wait, timed
    (warm-ups and trials)."""
    device, dtype, switches = req["device_obj"], req["dtype"], req["switches"]
    base = {"compile": req["compile"], "compile_mode": req["compile_mode"], "device": str(device),
            "hardware": hardware_name(device), "precision": req["precision"], "switches": switches}
    phases = {"start": round(time.monotonic() - pinned.STARTED, 3)}  # importing torch, reading the request
    last = time.monotonic()

    def phase(name):
        nonlocal last
        now = time.monotonic()
        phases[name] = round(now - last, 3)
        last = now

    try:
        _, _, Model, get_init_inputs, get_inputs = load_problem(req["problem_path"])
    except ProblemError as e:
        return dict(base, ok=False, error=str(e))
    if req["compile"]:
        # Seconds of imports, made before any turn rather than inside the first call's shared turn
        # (import_module: an import statement here would make `torch` a local of this function).
        for module in COMPILER_MODULES:
            importlib.import_module(module)
    phase("load")
    lock = req["lock"]
    try:
        with torch.no_grad():
            if device.type == "cuda":
                torch.cuda.set_device(device)
            synchronize(device)
            # KernelBench hard-codes 42 here; the request's seed defaults to 42.
            set_seed(req["seed"])
            inputs = get_inputs()
            set_seed(req["seed"])
            init_inputs = get_init_inputs()
            phase("inputs")
            lock.enter("shared")
            phase("shared_wait")
            inputs = [cast_baseline(x, device, dtype, switches) for x in inputs]
            init_inputs = [cast_baseline(x, device, dtype, switches) for x in init_inputs]
            model = Model(*init_inputs)
            model = model.to(device=device, dtype=dtype)
            synchronize(device)
            phase("build")
            if req["compile"]:
                torch._dynamo.reset()
                model = torch.compile(model, backend="inductor", mode=req["compile_mode"])
                if lock.active:
                    # Compile now, beside other processes' compiles and timings, not in the timed turn.
                    with compile_off_turn(lock, device, req["compile_mode"]):
                        model(*inputs)
                        synchronize(device)
                phase("compile")
            lock.enter("exclusive")
            phase("exclusive_wait")
            times = time_calls(model, lambda i: inputs, req["num_warmup"], req["num_perf_trials"], 1,
                               device, LIVE_CLOCK)
            lock.enter(None)
            phase("timed")
            stats = timing_stats(times, device)
        return dict(base, ok=True, mean_ms=stats["mean"], stats=stats, num_warmup=req["num_warmup"],
                    timer=timer_name(device), phases_s=phases)
    except BaseException as e:  # noqa: B036
        return dict(base, ok=False, error=f"{get_error_name(e)}: {e}", traceback=traceback.format_exc()[-4000:],
                    phases_s=phases)


def run_judge(req):
    """Compares saved reference and candidate outputs; executes no problem or candidate code."""
    tol, switches = req["tolerance"], req["switches"]
    try:
        ref = torch.load(req["reference_outputs"], map_location="cpu", weights_only=True)
    except Exception as e:
        return {"ok": False, "error": f"cannot read reference_outputs {req['reference_outputs']}: {e}"}
    result = {"ok": True, "strict_correct": False, "trials": len(ref.get("outputs", [])),
              "trials_passed": 0, "rotations": len(ref.get("rotation_outputs", [])), "rotations_passed": 0,
              "max_difference": None, "inputs_match": None, "reason": "", "precision": req["precision"],
              "tolerance": tol, "switches": switches}
    try:
        cand = torch.load(req["candidate_outputs"], map_location="cpu", weights_only=True)
        if not isinstance(cand, dict) or cand.get("kind") != "candidate":
            raise ValueError("not a candidate outputs file")
    except Exception as e:
        result["reason"] = f"cannot read candidate_outputs {req['candidate_outputs']}: {e}"
        return result
    reasons = []
    if ref.get("meta", {}).get("precision") != req["precision"] or cand.get("meta", {}).get("precision") != req["precision"]:
        reasons.append(f"precision differs: judge {req['precision']}, reference {ref.get('meta', {}).get('precision')}, "
                       f"candidate {cand.get('meta', {}).get('precision')}")
    if ref.get("trial_seeds") != cand.get("trial_seeds") or ref.get("rotation_seeds") != cand.get("rotation_seeds"):
        reasons.append("trial or rotation seeds differ between the reference and candidate files")
    result["inputs_match"] = (ref.get("input_checksums") == cand.get("input_checksums")
                              and ref.get("rotation_input_checksums") == cand.get("rotation_input_checksums"))
    if not result["inputs_match"]:
        reasons.append("the inputs differ between the two processes (get_inputs is not deterministic?)")
    worst = None
    for key, count_key, label in (("outputs", "trials_passed", "trial"), ("rotation_outputs", "rotations_passed", "rotation")):
        refs, cands = ref.get(key, []), cand.get(key, [])
        errors = cand.get("errors", {}).get(key, [None] * len(cands))
        for i, r in enumerate(refs):
            if i >= len(cands) or (i < len(errors) and errors[i]):
                reasons.append(f"{label} {i}: candidate raised: {errors[i] if i < len(errors) else 'no output'}")
                continue
            ok, why, diff = compare_judge(r, cands[i], tol, switches["compare_tuple_outputs"], f"{label} {i}")
            if diff is not None:
                worst = diff if worst is None else max(worst, diff)
            if ok:
                result[count_key] += 1
            else:
                reasons.append(why)
    result["max_difference"] = worst
    result["strict_correct"] = not reasons and result["trials_passed"] == result["trials"] and \
        result["rotations_passed"] == result["rotations"]
    result["reason"] = "; ".join(reasons[:8]) + (f"; ... {len(reasons) - 8} more" if len(reasons) > 8 else "")
    return result
