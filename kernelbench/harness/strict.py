"""The farm's strict checks of a candidate, reported apart from the faithful verdict (HARNESS.md,
"Strict checks"): outputs for the judge, input mutation, output poisoning, work that escapes the
current stream, rotated timing."""

import math
import warnings

import torch

from .compare import (bitwise_equal, clone_all, compare_judge, detached, has_sample, poison_values_appeared,
                      save_atomic, tensors_of, to_device, to_saveable)
from .gpu_lock import exclusive_turn
from .pinned import PINNED
from .problem import inputs_for, outputs_meta
from .request import HARNESS_VERSION, ROTATION_SUSPECT_RATIO, RUNTIME_ERROR_MAX_CHARS
from .scan import patched_names
from .timing import PINNED_CLOCK, get_error_name, median, round3, set_seed, synchronize, time_calls, timing_stats


def strict_checks(req, result, scan, snapshot, custom_model, get_inputs, trial_seeds):
    """The farm's checks, reported apart; they run after the faithful pass and change none of it."""
    device = req["device_obj"]
    strict = {"static_scan": scan, "monkeypatch": patched_names(snapshot), "outputs_saved": False,
              "input_mutation": None, "input_mutation_calls": [], "output_poison": None,
              "output_poison_detail": None, "side_stream": None, "side_stream_detail": None,
              "rotated_timing": None, "rotation_suspect": None,
              "excessive_speedup": bool(result["metadata"].get("excessive_speedup", False)),
              "check_errors": {}}
    rotation_seeds = [req["seed"] + 1 + r for r in range(req["rotations"])]

    def call(inputs):
        return custom_model(*inputs)

    # 1. Outputs on cloned inputs (trials and rotations) for the judge, and input mutation.
    saved = {"format": HARNESS_VERSION, "kind": "candidate", "meta": outputs_meta(req),
             "trial_seeds": trial_seeds, "rotation_seeds": rotation_seeds, "outputs": [], "rotation_outputs": [],
             "input_checksums": [], "rotation_input_checksums": [], "errors": {"outputs": [], "rotation_outputs": []}}
    mutated = []
    with torch.no_grad():
        for key, seeds, label in (("outputs", trial_seeds, "trial"), ("rotation_outputs", rotation_seeds, "rotation")):
            for i, s in enumerate(seeds):
                try:
                    inputs = inputs_for(s, get_inputs, req,
                                         saved["input_checksums" if key == "outputs" else "rotation_input_checksums"])
                    pristine, given = clone_all(inputs), clone_all(inputs)
                    set_seed(s)
                    out = call(given)
                    synchronize(device)
                    if not all(bitwise_equal(a, b) for a, b in zip(given, pristine)):
                        mutated.append(f"{label} {i}")
                    saved[key].append(to_saveable(out, sample=True))
                    saved["errors"][key].append(None)
                except (Exception, SystemExit) as e:
                    saved[key].append(None)
                    saved["errors"][key].append(f"{get_error_name(e)}: {str(e)[:RUNTIME_ERROR_MAX_CHARS]}")
    strict["input_mutation"] = bool(mutated)
    strict["input_mutation_calls"] = mutated
    if req["candidate_outputs"]:
        try:
            save_atomic(req["candidate_outputs"], saved)
            strict["outputs_saved"] = True
        except Exception as e:
            strict["check_errors"]["candidate_outputs"] = f"{get_error_name(e)}: {e}"
    output_errors = [e for errs in saved["errors"].values() for e in errs if e]
    if output_errors:
        strict["check_errors"]["outputs"] = output_errors[0]

    first_inputs = inputs_for(trial_seeds[0], get_inputs, req)

    # 2. Output poisoning: does the output depend on what the allocator hands back?
    try:
        strict["output_poison"], strict["output_poison_detail"] = _poison_check(call, first_inputs, device)
    except (Exception, SystemExit) as e:
        strict["check_errors"]["output_poison"] = f"{get_error_name(e)}: {e}"

    # 3. Work that escapes the current stream (CUDA only).
    if device.type == "cuda":
        try:
            # Exclusive: another process's kernels would change how long escaped work stays in flight.
            with exclusive_turn(req["lock"]):
                strict["side_stream"], strict["side_stream_detail"] = _side_stream_check(call, first_inputs, device,
                                                                                         scan)
        except (Exception, SystemExit) as e:
            strict["check_errors"]["side_stream"] = f"{get_error_name(e)}: {e}"

    # 4. Rotated timing: fresh clones of other input sets; outputs checked between calls.
    if result["runtime_ms"] > 0 and rotation_seeds and None not in saved["rotation_outputs"]:
        try:
            strict["rotated_timing"] = rotated_timing(custom_model, get_inputs, rotation_seeds,
                                                       saved["rotation_outputs"], req, result["runtime_ms"])
            rt = strict["rotated_timing"]
            strict["rotation_suspect"] = bool(rt["paired_median_ratio"] > ROTATION_SUSPECT_RATIO
                                              or not rt["outputs_consistent"])
        except (Exception, SystemExit) as e:
            strict["check_errors"]["rotated_timing"] = f"{get_error_name(e)}: {e}"
    # Patches made during the strict calls count too.
    strict["monkeypatch"] = patched_names(snapshot)
    return strict


def _poison_check(call, inputs, device):
    with torch.no_grad():
        clean = to_saveable(call(clone_all(inputs)))
        synchronize(device)
        clean2 = to_saveable(call(clone_all(inputs)))
        synchronize(device)
        deterministic = bitwise_equal(clean, clean2)

        # (a) Allocator poisoning: blocks of the sizes the call uses, filled with 0xFF (NaN in
        # fp32/fp16/bf16, -1 in integers) and freed so the allocator hands them back.
        sizes = sorted({t.numel() * t.element_size() for t in tensors_of(clean) + tensors_of(inputs)} | {64 << 20})
        blocks = []
        for nbytes in sizes:
            for _ in range(2):
                blocks.append(torch.full((max(nbytes, 1),), 255, dtype=torch.uint8, device=device))
        synchronize(device)
        del blocks
        poisoned_a = to_saveable(call(clone_all(inputs)))
        synchronize(device)

        # (b) torch's own poison: with deterministic algorithms on, torch.empty* and every ATen
        # allocation left uninitialised are filled with NaN (integers: their maximum).
        import torch.utils.deterministic as det

        prev_enabled = torch.are_deterministic_algorithms_enabled()
        prev_warn = torch.is_deterministic_algorithms_warn_only_enabled()
        prev_fill = det.fill_uninitialized_memory
        # torch._C directly: torch.use_deterministic_algorithms also imports torch._inductor
        # (seconds) and so rebinds torch functions, which the monkeypatch check would report.
        set_deterministic = getattr(torch._C, "_set_deterministic_algorithms", None) or torch.use_deterministic_algorithms
        try:
            det.fill_uninitialized_memory = True
            set_deterministic(True, warn_only=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                given = clone_all(inputs)
                poisoned_b = to_saveable(call(given))
                synchronize(device)
        finally:
            set_deterministic(prev_enabled, warn_only=prev_warn)
            det.fill_uninitialized_memory = prev_fill
    changed_a = not bitwise_equal(poisoned_a, clean)
    values_a = poison_values_appeared(poisoned_a, clean)
    values_b = poison_values_appeared(poisoned_b, clean)
    detail = {"deterministic": deterministic, "allocator_poison_changed_output": changed_a,
              "allocator_poison_values_in_output": values_a, "nan_fill_values_in_output": values_b}
    return bool(values_a or values_b or (deterministic and changed_a)), detail


def _side_stream_check(call, inputs, device, scan):
    """After a call returns, synchronise only the current stream (where KernelBench records its
    events), copy the output, then synchronise the device: a copy that differs from the final
    output was taken while work the call left on another stream was still writing it. Before
    each call, blocks of the output's sizes are filled with 0xFF and freed, and the previous
    call's tensors are kept alive, so an output not yet written cannot hold a right answer."""
    escaped, stream_changed = False, False
    with torch.no_grad():
        sizes = [t.numel() * t.element_size() for t in tensors_of(call(clone_all(inputs)))]
        PINNED["synchronize"](device=device)
        previous = None
        for _ in range(3):
            blocks = [torch.full((max(n, 1),), 255, dtype=torch.uint8, device=device) for n in sizes]
            del blocks
            given = clone_all(inputs)
            before = PINNED["current_stream"](device)
            PINNED["synchronize"](device=device)
            out = call(given)
            after = PINNED["current_stream"](device)
            stream_changed = stream_changed or after != before
            before.synchronize()
            copy = [PINNED["clone"](t) for t in tensors_of(out)]
            PINNED["synchronize"](device=device)
            if not all(bitwise_equal(c, t) for c, t in zip(copy, tensors_of(out))):
                escaped = True
            previous = (given, out, copy)  # noqa: F841 - held so the next output gets other memory
    detail = {"escaped_current_stream": escaped, "current_stream_changed": stream_changed,
              "source_uses_streams": "stream_injection" in scan["warnings"]}
    return bool(escaped or stream_changed), detail


def rotated_timing(custom_model, get_inputs, rotation_seeds, expected, req, faithful_ms):
    """Rotated inputs, timed in alternation with the faithful setting.

    Even calls repeat one fixed input set (the perf inputs, the same tensors every call, as in
    KernelBench's timing); odd calls take a fresh clone of the next rotation set (made outside
    the timed region) and their outputs are checked against the candidate's own rotation outputs.
    Alternating makes both halves see the same machine state, so their ratio survives noise that
    a comparison with the earlier faithful run would not (a loaded CPU, clocks).
    """
    device, tol = req["device_obj"], req["tolerance"]
    compare_tuples = req["switches"]["compare_tuple_outputs"]
    same = inputs_for(req["seed"], get_inputs, req)
    sets = [inputs_for(s, get_inputs, req) for s in rotation_seeds]
    expected_dev = [to_device(e, device) for e in expected]
    n_sets = len(sets)
    consistent = [True]
    scratch = [None]

    def args_for(i):
        # Both halves make the same clone (so allocator and cache state match); even calls
        # keep it aside for as long as an odd call keeps its arguments, and pass the fixed set.
        clone = clone_all(sets[(i // 2) % n_sets])
        if i % 2 == 1:
            scratch[0] = None
            return clone
        scratch[0] = clone
        return same

    def after(i, out):
        if i % 2 == 1:
            expect = expected_dev[(i // 2) % n_sets]
            # The saved outputs of large tensors are samples: sample this output alike.
            got = to_saveable(out, sample=True) if has_sample(expect) else detached(out)
            ok, _, _ = compare_judge(expect, got, tol, compare_tuples)
            consistent[0] = consistent[0] and ok

    warmup, discard = req["num_warmup"], 1
    with exclusive_turn(req["lock"]):
        times = time_calls(custom_model, args_for, warmup, 2 * req["rotation_perf_trials"] * n_sets, discard, device,
                           PINNED_CLOCK, after_call=after)
    first = warmup + discard
    rotated = [t for k, t in enumerate(times) if (first + k) % 2 == 1]
    fixed = [t for k, t in enumerate(times) if (first + k) % 2 == 0]
    rotated_mean = math.fsum(rotated) / len(rotated)
    paired = median(rotated) / median(fixed) if median(fixed) > 0 else float("inf")
    return {"mean_ms": round3(rotated_mean), "median_ms": round3(median(rotated)),
            "same_inputs_mean_ms": round3(math.fsum(fixed) / len(fixed)),
            "same_inputs_median_ms": round3(median(fixed)),
            "ratio": round(rotated_mean / faithful_ms, 4), "paired_median_ratio": round(paired, 4),
            "stats": timing_stats(rotated, device), "sets": n_sets, "trials_per_set": req["rotation_perf_trials"],
            "outputs_consistent": consistent[0]}
