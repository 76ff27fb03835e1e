"""Output comparison (KernelBench's trial check and the judge's), the saved outputs' format, and
the helpers of the strict checks that look at tensors (bitwise equality, checksums, poison)."""

import hashlib
import json
import math
import os

import torch

from .pinned import PINNED


def is_seq(x):
    return isinstance(x, (tuple, list))


def _as_tensor(x):
    return x if isinstance(x, torch.Tensor) else torch.as_tensor(x)


def compare_faithful(output, output_new, tol, compare_tuples):
    """One trial's check as run_and_check_correctness does it; raises what KernelBench raises.

    Returns ("pass", None), ("shape", message) or ("mismatch", (max_diff, avg_diff)). With
    compare_tuples and a tuple/list reference output, each element is checked by the same rules
    (deviation: KernelBench calls .shape on the tuple and the candidate gets a runtime error).
    """
    if compare_tuples and is_seq(output):
        if not is_seq(output_new) or len(output_new) != len(output):
            got = f"{type(output_new).__name__} of {len(output_new)}" if is_seq(output_new) else type(output_new).__name__
            return "shape", f"Output structure mismatch: Expected {type(output).__name__} of {len(output)}, got {got}"
        pairs = [(_as_tensor(o), _as_tensor(n)) for o, n in zip(output, output_new)]
        for i, (o, n) in enumerate(pairs):
            if o.shape != n.shape:
                return "shape", f"Output shape mismatch: Expected {o.shape}, got {n.shape} (output {i})"
    else:
        if output.shape != output_new.shape:
            return "shape", f"Output shape mismatch: Expected {output.shape}, got {output_new.shape}"
        pairs = [(output, output_new)]
    failed = [(o, n) for o, n in pairs if not torch.allclose(o, n, atol=tol, rtol=tol)]
    if not failed:
        return "pass", None
    if len(pairs) == 1:
        o, n = pairs[0]
        return "mismatch", (torch.max(torch.abs(o - n)).item(), torch.mean(torch.abs(o - n)).item())
    max_diff = max(torch.max(torch.abs(o - n)).item() if o.numel() else 0.0 for o, n in failed)
    total = sum(torch.sum(torch.abs(o - n).double()).item() for o, n in pairs)
    count = sum(o.numel() for o, _ in pairs)
    return "mismatch", (max_diff, total / max(count, 1))


def compare_judge(ref, cand, tol, compare_tuples, where="output"):
    """The judge's comparison: same tolerance and tuple rule; never raises.

    Returns (ok, reason, max_diff).
    """
    if is_seq(ref):
        if not compare_tuples:
            return False, f"{where}: a tuple/list output (KernelBench's check fails on it; switch compare_tuple_outputs is off)", None
        if not is_seq(cand) or len(cand) != len(ref):
            return False, f"{where}: expected a {type(ref).__name__} of {len(ref)}, got {_short_type(cand)}", None
        worst = None
        for i, (r, c) in enumerate(zip(ref, cand)):
            ok, reason, diff = compare_judge(r, c, tol, compare_tuples, f"{where}[{i}]")
            if diff is not None:
                worst = diff if worst is None else max(worst, diff)
            if not ok:
                return False, reason, worst
        return True, "", worst
    if isinstance(ref, dict) and ref.get("ak_sampled"):
        if not (isinstance(cand, dict) and cand.get("ak_sampled")):
            return False, f"{where}: expected a tensor of shape {tuple(ref['shape'])}, got {_short_type(cand)}", None
        if ref["shape"] != cand["shape"]:
            return False, f"{where}: shape mismatch: expected {tuple(ref['shape'])}, got {tuple(cand['shape'])}", None
        if ref["dtype"] != cand["dtype"]:
            return False, f"{where}: dtype mismatch: expected {ref['dtype']}, got {cand['dtype']}", None
        ok, reason, diff = compare_judge(ref["values"], cand["values"], tol, compare_tuples, where)
        return ok, (reason + f" (at {ref['values'].numel()} sampled positions of {ref['numel']})") if reason else "", diff
    if isinstance(cand, dict) and cand.get("ak_sampled"):
        return False, f"{where}: expected {_short_type(ref)} of {getattr(ref, 'numel', lambda: 1)()} elements, got a sampled tensor of {cand['numel']}", None
    if not isinstance(ref, torch.Tensor):
        ref = torch.as_tensor(ref)
        cand = torch.as_tensor(cand) if isinstance(cand, (int, float, bool)) else cand
    if not isinstance(cand, torch.Tensor):
        return False, f"{where}: expected a tensor, got {_short_type(cand)}", None
    if ref.shape != cand.shape:
        return False, f"{where}: shape mismatch: expected {tuple(ref.shape)}, got {tuple(cand.shape)}", None
    if ref.dtype != cand.dtype:
        return False, f"{where}: dtype mismatch: expected {ref.dtype}, got {cand.dtype}", None
    try:
        close = PINNED["allclose"](ref, cand, atol=tol, rtol=tol)
    except RuntimeError as e:
        return False, f"{where}: cannot compare: {e}", None
    diff = None
    if ref.numel() and ref.dtype != torch.bool:
        diff = (torch.max(torch.abs(ref - cand)).item() if ref.is_complex()
                else torch.max(torch.abs(ref.double() - cand.double())).item())
    if not close:
        return False, f"{where}: values differ beyond atol=rtol={tol} (max difference {diff})", diff
    return True, "", diff


def _short_type(x):
    if isinstance(x, torch.Tensor):
        return f"tensor{tuple(x.shape)}"
    if is_seq(x):
        return f"{type(x).__name__} of {len(x)}"
    return type(x).__name__


# ---------------------------------------------------------------------------------------------
# Helpers for the strict checks and the saved outputs
# ---------------------------------------------------------------------------------------------


def clone_all(values):
    return [PINNED["clone"](v) if isinstance(v, torch.Tensor) else v for v in values]


# The judge's files hold whole output tensors up to this many elements; a larger tensor is saved as
# a sample of this many elements at positions that depend only on its element count, the same in
# both processes (KernelBench's level-1 GEMMs return 4 GiB outputs: five trials and the rotations,
# whole, on both sides, would need tens of GiB of disk per job). HARNESS.md, "judge".
JUDGE_SAMPLE_ELEMENTS = 1 << 24


def _sample_positions(numel, k):
    g = torch.Generator().manual_seed(0x5A3D1E ^ numel)
    return torch.randint(numel, (k,), generator=g)


def to_saveable(x, sample=False):
    """Output -> something torch.load(weights_only=True) reads: cpu tensors, tuples, lists, numbers.

    With sample, a tensor of more than JUDGE_SAMPLE_ELEMENTS elements becomes
    {"ak_sampled": 1, "shape", "dtype", "numel", "values"}."""
    if isinstance(x, torch.Tensor):
        x = PINNED["detach"](x)
        if sample and x.numel() > JUDGE_SAMPLE_ELEMENTS:
            pos = _sample_positions(x.numel(), JUDGE_SAMPLE_ELEMENTS).to(x.device)
            values = x.reshape(-1)[pos]
            return {"ak_sampled": 1, "shape": list(x.shape), "dtype": str(x.dtype), "numel": x.numel(),
                    "values": PINNED["clone"](PINNED["cpu"](values))}
        return PINNED["clone"](PINNED["cpu"](x))
    if isinstance(x, tuple):  # also torch.return_types (structseq)
        return tuple(to_saveable(v, sample) for v in x)
    if isinstance(x, list):
        return [to_saveable(v, sample) for v in x]
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    raise TypeError(f"output of type {type(x).__name__} cannot be saved (expected tensors, tuples, lists, numbers)")


def bitwise_equal(a, b):
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.dtype != b.dtype or a.shape != b.shape or a.device != b.device:
            return False
        return PINNED["equal"](_bytes_view(a), _bytes_view(b))
    if is_seq(a) and is_seq(b):
        return len(a) == len(b) and all(bitwise_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return False
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _bytes_view(t):
    t = PINNED["detach"](t)
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.contiguous().reshape(-1).view(torch.uint8)


def input_checksum(values):
    h = hashlib.sha256()
    for v in values:
        if isinstance(v, torch.Tensor):
            h.update(f"tensor {v.dtype} {tuple(v.shape)};".encode())
            # A view, not .tobytes(): no copy of a GiB-sized input (7x faster, half the memory).
            h.update(memoryview(PINNED["cpu"](_bytes_view(v)).numpy()))
        else:
            h.update(f"{type(v).__name__} {v!r};".encode())
    return h.hexdigest()


def tensors_of(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if is_seq(x):
        return [t for v in x for t in tensors_of(v)]
    return []


def poison_values_appeared(poisoned, clean):
    """True where the poisoned call shows a poison value (NaN/inf, or an integer type's maximum)
    at a position the clean call did not."""
    for p, c in zip(tensors_of(poisoned), tensors_of(clean)):
        if p.shape != c.shape or p.dtype != c.dtype:
            continue
        if p.is_floating_point() or p.is_complex():
            if bool((~PINNED["isfinite"](p) & PINNED["isfinite"](c)).any()):
                return True
        elif p.dtype != torch.bool:
            top = torch.iinfo(p.dtype).max
            if bool(((p == top) & (c != top)).any()):
                return True
    return False


def write_json_atomic(path, obj):
    text = json.dumps(_json_safe(obj), indent=1, sort_keys=True, allow_nan=False)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.write("\n")
    os.replace(tmp, path)


def save_atomic(path, obj):
    tmp = f"{path}.tmp.{os.getpid()}"
    PINNED["save"](obj, tmp)
    os.replace(tmp, path)


def _json_safe(x):
    if isinstance(x, dict):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if x is None or isinstance(x, (bool, int, str)):
        return x
    return str(x)


def has_sample(x):
    if isinstance(x, dict):
        return bool(x.get("ak_sampled"))
    return is_seq(x) and any(has_sample(v) for v in x)


def to_device(x, device):
    if isinstance(x, torch.Tensor):
        return x.to(device=device)
    if is_seq(x):
        return type(x)(to_device(v, device) for v in x)
    return x


def detached(x):
    if isinstance(x, torch.Tensor):
        return PINNED["detach"](x)
    if isinstance(x, list):
        return [detached(v) for v in x]
    if isinstance(x, tuple):
        return tuple(detached(v) for v in x)
    return x
