"""KernelBench's timing (timing.py: time_execution_with_cuda_event, get_timing_stats) and the small
building blocks of eval.py (seeding, error names, synchronisation)."""

import math
import time

import torch

from .pinned import PERF_COUNTER, PINNED


def set_seed(seed):
    torch.manual_seed(seed)
    # KernelBench calls torch.cuda.manual_seed unconditionally (it only runs with CUDA).
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)


def get_error_name(e):
    return f"{e.__class__.__module__}.{e.__class__.__name__}"


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device=device)


def hardware_name(device):
    return torch.cuda.get_device_name(device=device) if device.type == "cuda" else "cpu"


class _LiveClock:
    """Looks each timing function up at call time, exactly as KernelBench's timing.py does."""

    def perf_counter(self):
        return time.perf_counter()

    def synchronize(self, device):
        torch.cuda.synchronize(device=device)

    def empty_cache(self):
        torch.cuda.empty_cache()

    def events(self):
        return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def record(self, event):
        event.record()

    def elapsed(self, start, end):
        return start.elapsed_time(end)

    def clear_l2_cache(self, device):
        dummy = torch.empty((32, 1024, 1024), dtype=torch.int64, device=device)
        dummy.fill_(42)
        del dummy


class _PinnedClock(_LiveClock):
    """The same steps with the functions captured when the harness started (strict checks)."""

    def perf_counter(self):
        return PERF_COUNTER()

    def synchronize(self, device):
        PINNED["synchronize"](device=device)

    def empty_cache(self):
        PINNED["empty_cache"]()

    def events(self):
        return PINNED["event"](enable_timing=True), PINNED["event"](enable_timing=True)

    def record(self, event):
        PINNED["event_record"](event)

    def elapsed(self, start, end):
        return PINNED["event_elapsed"](start, end)

    def clear_l2_cache(self, device):
        dummy = PINNED["empty"]((32, 1024, 1024), dtype=torch.int64, device=device)
        dummy.fill_(42)
        del dummy


LIVE_CLOCK = _LiveClock()
PINNED_CLOCK = _PinnedClock()


def time_calls(fn, args_for_call, num_warmup, num_trials, discard_first, device, clock, after_call=None):
    """KernelBench time_execution_with_cuda_event, generalised to per-call arguments.

    args_for_call(i) gives the arguments of the i-th call (warm-ups first); the faithful timing
    passes the same list every time. after_call(i, output) runs after a timed call's
    synchronize, outside the timed region. Returns num_trials times [ms] (the first
    discard_first trials dropped); the k-th belongs to call num_warmup + discard_first + k.

    On a CUDA device: warm-ups each followed by synchronize, empty_cache, then per trial:
    synchronize, two new events, L2 flush (256 MiB fill), record, call, record, synchronize,
    elapsed_time. Without CUDA (deviation forced by the device): time.perf_counter around the
    call, same warm-up, discard and trial counts, no L2 flush.
    """
    call = 0
    elapsed = []
    if device.type == "cuda":
        with torch.cuda.device(device):
            for _ in range(num_warmup):
                fn(*args_for_call(call))
                call += 1
                clock.synchronize(device)
            clock.empty_cache()
            for trial in range(num_trials + discard_first):
                args = args_for_call(call)
                call += 1
                clock.synchronize(device)
                start_event, end_event = clock.events()
                clock.clear_l2_cache(device)
                clock.record(start_event)
                out = fn(*args)
                clock.record(end_event)
                clock.synchronize(device)
                elapsed_ms = clock.elapsed(start_event, end_event)
                if after_call is not None:
                    after_call(call - 1, out)
                del out
                if trial >= discard_first:
                    elapsed.append(elapsed_ms)
        return elapsed
    for _ in range(num_warmup):
        fn(*args_for_call(call))
        call += 1
    for trial in range(num_trials + discard_first):
        args = args_for_call(call)
        call += 1
        start = clock.perf_counter()
        out = fn(*args)
        end = clock.perf_counter()
        if after_call is not None:
            after_call(call - 1, out)
        del out
        if trial >= discard_first:
            elapsed.append((end - start) * 1000.0)
    return elapsed


def round3(x):
    return float(f"{x:.3g}")


def timing_stats(elapsed_ms, device):
    """KernelBench get_timing_stats: mean, std (population), min, max at 3 significant digits."""
    try:
        import numpy as np

        mean, std = float(np.mean(elapsed_ms)), float(np.std(elapsed_ms))
    except ImportError:  # the same numbers without numpy
        mean = math.fsum(elapsed_ms) / len(elapsed_ms)
        std = math.sqrt(math.fsum((x - mean) ** 2 for x in elapsed_ms) / len(elapsed_ms))
    return {
        "mean": round3(mean),
        "std": round3(std),
        "min": round3(min(elapsed_ms)),
        "max": round3(max(elapsed_ms)),
        "num_trials": len(elapsed_ms),
        "hardware": hardware_name(device),
        "device": str(device),
    }


def trial_seeds_for(seed, n):
    """run_and_check_correctness: the trial seeds drawn from the run's seed."""
    torch.manual_seed(seed)
    return [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(n)]


def median(values):
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
