"""The GPU turn lock by which harness processes share one GPU (HARNESS.md, "Sharing a GPU"), and
torch.compile's first call made with no turn held while dynamo and inductor compile."""

import contextlib
import fcntl
import os
import time

from .timing import synchronize


class GpuLock:
    """Turns between the harness processes that share one GPU (HARNESS.md, "Sharing a GPU").

    A process changes mode with enter() (a candidate goes back to "shared" after each timed section):
      None         no GPU work yet (loading code, building models on the CPU, compiling extensions);
      "shared"     GPU work that measures nothing (moving models and inputs, correctness trials,
                   the first call of a torch.compile model): any number of processes at once,
                   never during another's timing;
      "exclusive"  timing: no other process holds the lock in either mode.
    Two flock(2) files: the lock itself, and a gate that a process wanting the exclusive mode holds
    while it waits and times, so that processes arriving for a shared turn queue behind it (a
    stream of compiles cannot starve a timing). Locks go with the process when it exits. Without a
    path every call is a no-op. Waits and exclusive time are counted in .stats (milliseconds), with
    each exclusive turn's span in seconds of CLOCK_MONOTONIC (one clock for every process of the
    machine, and one a clock step cannot move), so turns can be compared across processes.
    """

    def __init__(self, path):
        self.stats = {"shared_wait_ms": 0.0, "exclusive_wait_ms": 0.0, "exclusive_ms": 0.0, "exclusive_spans": []}
        self.mode = None
        self._since = 0.0
        self._lock_fd = self._gate_fd = None
        if path:
            self._lock_fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            self._gate_fd = os.open(path + ".gate", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)

    @property
    def active(self):
        return self._lock_fd is not None

    def enter(self, mode):
        if not self.active or mode == self.mode:
            return
        if self.mode == "exclusive":
            self.stats["exclusive_ms"] += (time.monotonic() - self._since) * 1e3
            self.stats["exclusive_spans"][-1][1] = time.monotonic()
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            fcntl.flock(self._gate_fd, fcntl.LOCK_UN)
        elif self.mode == "shared":
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        self.mode = None
        t0 = time.monotonic()
        if mode == "shared":
            fcntl.flock(self._gate_fd, fcntl.LOCK_EX)
            fcntl.flock(self._gate_fd, fcntl.LOCK_UN)
            fcntl.flock(self._lock_fd, fcntl.LOCK_SH)
            self.stats["shared_wait_ms"] += (time.monotonic() - t0) * 1e3
        elif mode == "exclusive":
            fcntl.flock(self._gate_fd, fcntl.LOCK_EX)
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
            self._since = time.monotonic()
            self.stats["exclusive_wait_ms"] += (self._since - t0) * 1e3
            self.stats["exclusive_spans"].append([time.monotonic(), None])
        self.mode = mode


@contextlib.contextmanager
def exclusive_turn(lock):
    """The exclusive turn around one timed section, then back to the mode held before (a shared
    turn for a candidate). The section's inputs (get_inputs) are made before it; the rotated
    timing's per-call clones are made inside it, between its timed calls."""
    before = lock.mode
    lock.enter("exclusive")
    try:
        yield
    finally:
        lock.enter(before)


# torch.compile's modules: seconds of imports, made before any turn (a compile baseline) or once
# for every step (the fork server).
COMPILER_MODULES = ("torch._dynamo.callback", "torch._inductor.compile_fx")


# What inductor runs on the GPU while it compiles in its default mode: its Benchmarker's entry
# points (every benchmark goes through the one instance), and pad_mm's padded-or-not decision,
# which makes its random operands and padded copies on the device before it benchmarks them.
_INDUCTOR_BENCHMARK_METHODS = ("benchmark", "benchmark_gpu")


@contextlib.contextmanager
def compile_off_turn(lock, device, compile_mode):
    """A torch.compile model's first call, made in a shared turn, with no turn held while dynamo and
    inductor compile (HARNESS.md, "Sharing a GPU"): a compile takes seconds to minutes of CPU, and
    a shared turn held through it would keep every waiting timing, and through the gate every other
    process, waiting for it. Dynamo's compile-start callback waits for the device to finish what
    was queued (the graph before a graph break) and gives the shared turn up; its compile-end
    callback takes it again before the compiled code runs. Inductor's GPU work during the compile
    (its benchmarks, pad_mm's decision) takes the shared turn for its own span, so that no other
    process's timing runs beside it. Only inductor's default mode: max-autotune and the other modes
    make and time their candidates on the device from many places, so they keep the shared turn
    through the compile. The time spent without a turn is counted in
    lock.stats["compile_off_turn_ms"], the wrapped GPU work in lock.stats["compile_benchmarks"]."""
    if not lock.active or lock.mode != "shared" or compile_mode != "default":
        yield
        return
    import torch._dynamo.callback as dynamo_callback
    from torch._inductor.fx_passes import pad_mm
    from torch._inductor.runtime import benchmarking

    since = [None]

    def on_start(args):
        # Only dynamo's compiles (the handler also fires around CUDA-graph recording, GPU work).
        if args.callback_trigger is not dynamo_callback.CallbackTrigger.DYNAMO or lock.mode != "shared":
            return
        synchronize(device)
        lock.enter(None)
        since[0] = time.monotonic()

    def on_end(_args):
        if since[0] is not None:
            lock.stats["compile_off_turn_ms"] = lock.stats.get("compile_off_turn_ms", 0.0) + (
                time.monotonic() - since[0]) * 1e3
            since[0] = None
            lock.enter("shared")

    def in_shared_turn(method):
        def run(*args, **kwargs):
            if lock.mode is not None:  # already in a turn (benchmark calls benchmark_gpu)
                return method(*args, **kwargs)
            lock.stats["compile_benchmarks"] = lock.stats.get("compile_benchmarks", 0) + 1
            lock.enter("shared")
            try:
                return method(*args, **kwargs)
            finally:
                synchronize(device)
                lock.enter(None)
        return run

    bench = benchmarking.benchmarker
    # (owner, attribute, what was there: None when the attribute came from the class)
    patched = [(bench, name, bench.__dict__.get(name)) for name in _INDUCTOR_BENCHMARK_METHODS]
    patched.append((pad_mm, "_should_pad", pad_mm._should_pad))
    for owner, name, _ in patched:
        setattr(owner, name, in_shared_turn(getattr(owner, name)))
    handler = dynamo_callback.callback_handler
    handler.register_start_callback(on_start)
    handler.register_end_callback(on_end)
    try:
        yield
    finally:
        handler.remove_start_callback(on_start)
        handler.remove_end_callback(on_end)
        for owner, name, value in patched:
            if value is None:
                owner.__dict__.pop(name, None)
            else:
                setattr(owner, name, value)
        if lock.mode is None:  # a compile that raised: its end callback still ran, but be sure
            lock.enter("shared")
