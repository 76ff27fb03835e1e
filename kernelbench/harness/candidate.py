"""Candidate mode: KernelBench's eval_kernel_against_ref step for step (compile, correctness
trials, timing of candidate and reference), then the farm's strict checks (strict.py)."""

import os
import traceback

import torch

from .compare import compare_faithful
from .gpu_lock import exclusive_turn
from .problem import build_reference, inputs_for, load_candidate, load_problem, timer_name
from .request import EXCESSIVE_SPEEDUP_THRESHOLD, RUNTIME_ERROR_MAX_CHARS, ProblemError
from .scan import static_scan, take_patch_snapshot
from .strict import strict_checks
from .timing import (LIVE_CLOCK, get_error_name, hardware_name, set_seed, synchronize, time_calls, timing_stats,
                     trial_seeds_for)


def run_candidate(req):
    device, dtype = req["device_obj"], req["dtype"]
    switches, seed, backend = req["switches"], req["seed"], req["backend"]
    torch.set_printoptions(precision=4, threshold=10, edgeitems=3, linewidth=80)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    metadata = {"hardware": hardware_name(device), "device": str(device)}
    result = {
        "compiled": False, "correctness": False, "verdict": "compile_failure", "metadata": metadata,
        "runtime_ms": -1.0, "runtime_stats": {}, "ref_runtime_ms": -1.0, "ref_runtime_stats": {},
        "switches": switches, "device": str(device), "precision": req["precision"], "backend": backend,
        "seed": seed, "num_correct_trials": req["num_correct_trials"], "num_perf_trials": req["num_perf_trials"],
        "num_warmup": req["num_warmup"], "timer": timer_name(device), "retryable": False, "strict": None,
    }
    with open(req["candidate_path"], "r", encoding="utf-8", errors="replace") as f:
        candidate_src = f.read()
    scan = static_scan(candidate_src, backend, req["precision"])

    # The problem: everything up to here is the problem's own code; a failure is not a verdict.
    loaded = load_problem(req["problem_path"])
    context, get_inputs = loaded[1], loaded[4]
    try:
        original_model, init_inputs = build_reference(req, loaded)
    except BaseException as e:  # noqa: B036
        raise ProblemError(f"the problem's get_init_inputs() or Model() failed: {get_error_name(e)}: {e}")
    snapshot = take_patch_snapshot(context, original_model) if req["strict"] else None

    # Compile: exec (cuda, torch) into the problem's context, or import from a temp file (triton).
    os.environ["TORCH_USE_CUDA_DSA"] = "1"
    temp_path = None
    try:
        ModelNew, temp_path = load_candidate(candidate_src, context, backend, req["build_dir"])
        synchronize(device)
    except (Exception, SystemExit) as e:
        # KernelBench returns None (a retry) for messages about lock files or missing files.
        result["retryable"] = "lock" in str(e) or "No such file or directory" in str(e)
        metadata["compilation_error_name"] = get_error_name(e)
        metadata["compilation_error"] = str(e)
        return _finish_early(result, req, scan, "compile_failure")
    try:
        if ModelNew is None:
            metadata["compilation_error_name"] = "SyntaxError"
            metadata["compilation_error"] = "Syntax error in custom generated code or ModelNew not found"
            return _finish_early(result, req, scan, "compile_failure")
        result["compiled"] = True
        req["lock"].enter("shared")  # the GPU from here on; timing takes the exclusive turn below
        try:
            with torch.no_grad():
                set_seed(seed)
                custom_model = ModelNew(*init_inputs)
                assert hasattr(custom_model, "forward")
                original_model = original_model.to(device=device, dtype=dtype)
                custom_model = custom_model.to(device=device, dtype=dtype)
                synchronize(device)
        except (Exception, SystemExit) as e:
            metadata["runtime_error"] = str(e)
            metadata["runtime_error_name"] = get_error_name(e)
            return _finish_early(result, req, scan, "runtime_error")

        trial_seeds = trial_seeds_for(seed, req["num_correct_trials"])
        try:
            correct = _check_correctness(original_model, custom_model, get_inputs, metadata, trial_seeds, req)
        except (Exception, SystemExit) as e:  # the reference's forward raised (outside KernelBench's inner try)
            metadata["runtime_error"] = str(e)
            metadata["runtime_error_name"] = get_error_name(e)
            correct = False
        result["correctness"] = correct

        # Performance: the candidate when correct; the reference always (excessive-speedup check).
        # Each timed section takes the exclusive turn; the inputs it times are made before it, with
        # no turn held (KernelBench's get_inputs builds GiB-sized tensors on the CPU), and moved to
        # the device in the shared turn.
        if correct:
            try:
                synchronize(device)
                inputs = inputs_for(seed, get_inputs, req)
                model_new = custom_model.to(device=device, dtype=dtype)
                synchronize(device)
                with exclusive_turn(req["lock"]):
                    times = time_calls(model_new, lambda i: inputs, req["num_warmup"], req["num_perf_trials"], 1,
                                       device, LIVE_CLOCK)
                result["runtime_stats"] = timing_stats(times, device)
                result["runtime_ms"] = result["runtime_stats"]["mean"]
            except (Exception, SystemExit) as e:
                metadata["error_during_performance"] = str(e)
        try:
            synchronize(device)
            inputs = inputs_for(seed, get_inputs, req)
            custom_model.to(device=device, dtype=dtype)
            synchronize(device)
            with exclusive_turn(req["lock"]):
                times = time_calls(original_model, lambda i: inputs, req["num_warmup"], req["num_perf_trials"], 1,
                                   device, LIVE_CLOCK)
            result["ref_runtime_stats"] = timing_stats(times, device)
            result["ref_runtime_ms"] = result["ref_runtime_stats"]["mean"]
            if result["runtime_ms"] > 0 and \
                    result["ref_runtime_ms"] / result["runtime_ms"] > EXCESSIVE_SPEEDUP_THRESHOLD:
                metadata["excessive_speedup"] = True
        except (Exception, SystemExit) as e:  # KernelBench would let this escape
            result["ref_timing_error"] = f"{get_error_name(e)}: {e}"

        result["verdict"] = ("correct" if correct else
                             "runtime_error" if "runtime_error" in metadata else "incorrect")
        if req["strict"]:
            result["strict"] = strict_checks(req, result, scan, snapshot, custom_model, get_inputs, trial_seeds)
        return result
    finally:
        if temp_path:
            try:
                os.remove(temp_path)
            except OSError:
                pass


def _finish_early(result, req, scan, verdict):
    result["verdict"] = verdict
    if req["strict"]:
        result["strict"] = {"skipped": verdict, "static_scan": scan, "monkeypatch": None,
                            "outputs_saved": False, "input_mutation": None, "output_poison": None,
                            "side_stream": None, "rotated_timing": None, "rotation_suspect": None,
                            "excessive_speedup": False, "check_errors": {}}
    return result


def _check_correctness(original_model, custom_model, get_inputs, metadata, trial_seeds, req):
    """KernelBench run_and_check_correctness, step for step."""
    device, dtype, tol = req["device_obj"], req["dtype"], req["tolerance"]
    n = len(trial_seeds)
    pass_count = 0
    with torch.no_grad():
        for trial in range(n):
            trial_seed = trial_seeds[trial]
            inputs = inputs_for(trial_seed, get_inputs, req)
            set_seed(trial_seed)
            model = original_model.to(device=device, dtype=dtype)
            set_seed(trial_seed)
            model_new = custom_model.to(device=device, dtype=dtype)
            output = model(*inputs)
            synchronize(device)
            try:
                output_new = model_new(*inputs)
                synchronize(device)
                status, detail = compare_faithful(output, output_new, tol, req["switches"]["compare_tuple_outputs"])
                if status == "shape":
                    metadata["correctness_issue"] = detail
                    metadata["correctness_issue_name"] = "correctness_issue"
                    return False
                if status == "mismatch":
                    metadata.setdefault("max_difference", []).append(f"{detail[0]:.6f}")
                    metadata.setdefault("avg_difference", []).append(f"{detail[1]:.6f}")
                    metadata["correctness_issue"] = "Output mismatch"
                else:
                    pass_count += 1
            except (Exception, SystemExit) as e:
                text = str(e)
                if len(text) > RUNTIME_ERROR_MAX_CHARS:
                    text = text[: RUNTIME_ERROR_MAX_CHARS - 3] + "..."
                metadata["runtime_error"] = text
                metadata["runtime_error_name"] = get_error_name(e)
                metadata["runtime_error_traceback"] = traceback.format_exc()
                return False
    metadata["correctness_trials"] = f"({pass_count} / {n})"
    return pass_count == n
