#!/usr/bin/env python3
"""The KernelBench-faithful harness and the farm's strict checks, as one standalone script.

    python kernelbench/harness.py REQUEST_JSON_PATH

The worker runs it as a subprocess inside its sandbox. It reads one request (JSON), writes ONE
JSON object to request["result_path"] (written under a temporary name, then renamed) and exits 0
whenever that object was written, even for a failed candidate; it exits 2 for a bad request (the
reason on stderr, nothing written) and 1 if the harness itself failed. Nothing is read from
stdout: candidate code may print anything there.

The protocol, the request and result schemas, and every deviation from KernelBench with the switch
that controls it are documented in kernelbench/HARNESS.md; this file follows that document. The
faithful path mirrors ScalingIntelligence/KernelBench src/kernelbench/eval.py
(eval_kernel_against_ref, run_and_check_correctness), timing.py (time_execution_with_cuda_event,
get_timing_stats, measure_ref_program_time) and kernel_static_checker.py, step for step.
"""

import contextlib
import fcntl
import gc
import hashlib
import importlib.util
import json
import math
import os
import re
import sys
import tempfile
import time
import traceback
import types
import warnings

# Timing and comparison functions captured before any problem or candidate code runs. The faithful
# path looks them up at call time, as KernelBench does (a candidate that patches them fools it
# exactly as it would fool KernelBench); the strict checks use these pinned originals.
_PINNED_PERF_COUNTER = time.perf_counter
_STARTED = time.monotonic()  # before torch's import, for a baseline's "start" phase

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

_PINNED = {
    "clone": torch.Tensor.clone,
    "detach": torch.Tensor.detach,
    "cpu": torch.Tensor.cpu,
    "equal": torch.equal,
    "allclose": torch.allclose,
    "isfinite": torch.isfinite,
    "empty": torch.empty,
    "save": torch.save,
    "event": torch.cuda.Event,
    "event_record": torch.cuda.Event.record,
    "event_elapsed": torch.cuda.Event.elapsed_time,
    "synchronize": torch.cuda.synchronize,
    "empty_cache": torch.cuda.empty_cache,
    "current_stream": torch.cuda.current_stream,
}

HARNESS_VERSION = 1

MODES = ("reference", "candidate", "judge", "baseline", "inspect")
BACKENDS = ("cuda", "triton", "torch")
PRECISIONS = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# KernelBench get_tolerance_for_precision (atol = rtol).
TOLERANCES = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}
DEFAULT_SWITCHES = {"keep_integer_inputs": True, "compare_tuple_outputs": True}
EXCESSIVE_SPEEDUP_THRESHOLD = 10.0  # KernelBench's excessive_speedup_threshold
ROTATION_SUSPECT_RATIO = 1.5
RUNTIME_ERROR_MAX_CHARS = 200  # KernelBench register_and_format_exception(truncate=True)

# Request keys, their JSON types and defaults (None: no default; a mode may require it).
_REQUEST_KEYS = {
    "mode": (str, None),
    "problem_path": (str, None),
    "candidate_path": (str, None),
    "backend": (str, "cuda"),
    "device": (str, None),  # default: cuda:0 if available else cpu
    "precision": (str, "fp32"),
    "seed": (int, 42),
    "num_correct_trials": (int, 5),
    "num_perf_trials": (int, 100),
    "num_warmup": (int, None),  # 3; baseline mode 5
    "build_dir": (str, None),
    "reference_outputs": (str, None),
    "candidate_outputs": (str, None),
    "compile": (bool, False),
    "compile_mode": (str, "default"),
    "switches": (dict, None),
    "strict": (bool, True),
    "rotations": (int, 4),
    "rotation_perf_trials": (int, 10),
    "result_path": (str, None),
    "gpu_lock": (str, None),  # lock file shared by the processes that use this GPU at once
}


class BadRequest(Exception):
    """The request cannot be evaluated as written (exit 2, nothing written)."""


class ProblemError(Exception):
    """The problem itself failed before any candidate code ran (candidate mode: exit 2)."""


# ---------------------------------------------------------------------------------------------
# Request
# ---------------------------------------------------------------------------------------------


def _parse_device(text):
    if text == "cpu":
        return torch.device("cpu")
    if text == "cuda" or re.fullmatch(r"cuda:\d+", text):
        if not torch.cuda.is_available():
            raise BadRequest(f'device "{text}" requested but torch.cuda.is_available() is false here; '
                             'send "device": "cpu" or run on a GPU machine')
        dev = torch.device(text if text != "cuda" else "cuda:0")
        if dev.index >= torch.cuda.device_count():
            raise BadRequest(f'device "{text}" requested but only {torch.cuda.device_count()} CUDA '
                             'device(s) are visible')
        return dev
    raise BadRequest(f'device must be "cpu", "cuda" or "cuda:N"; got "{text}"')


def load_request(path):
    try:
        with open(path, "r", encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError) as e:
        raise BadRequest(f"cannot read the request {path}: {e}")
    if not isinstance(raw, dict):
        raise BadRequest(f"the request must be a JSON object; got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(_REQUEST_KEYS))
    if unknown:
        raise BadRequest(f"unknown request key(s) {unknown}; known keys are {sorted(_REQUEST_KEYS)}")
    req = {}
    for key, (typ, default) in _REQUEST_KEYS.items():
        value = raw.get(key)
        if value is None:
            req[key] = default
            continue
        # bool is an int in Python: a JSON true is not a trial count.
        if typ is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise BadRequest(f'"{key}" must be an integer; got {json.dumps(value)}')
        if typ is not int and not isinstance(value, typ):
            raise BadRequest(f'"{key}" must be a JSON {typ.__name__}; got {json.dumps(value)}')
        req[key] = value

    mode = req["mode"]
    if mode not in MODES:
        raise BadRequest(f'"mode" must be one of {list(MODES)}; got {json.dumps(mode)}')
    if not req["result_path"]:
        raise BadRequest('"result_path" is required')
    result_dir = os.path.dirname(os.path.abspath(req["result_path"]))
    if not os.path.isdir(result_dir):
        raise BadRequest(f"the directory of result_path ({result_dir}) does not exist")
    if req["backend"] not in BACKENDS:
        raise BadRequest(f'"backend" must be one of {list(BACKENDS)}; got "{req["backend"]}"')
    if req["precision"] not in PRECISIONS:
        raise BadRequest(f'"precision" must be one of {list(PRECISIONS)}; got "{req["precision"]}"')
    for key, low in (("num_correct_trials", 1), ("num_perf_trials", 1), ("num_warmup", 0),
                     ("rotations", 0), ("rotation_perf_trials", 1)):
        if req[key] is not None and req[key] < low:
            raise BadRequest(f'"{key}" must be >= {low}; got {req[key]}')
    if not 0 <= req["seed"] < 2**63:
        raise BadRequest(f'"seed" must be in [0, 2^63); got {req["seed"]}')
    if req["num_warmup"] is None:
        req["num_warmup"] = 5 if mode == "baseline" else 3

    switches = dict(DEFAULT_SWITCHES)
    for key, value in (req["switches"] or {}).items():
        if key not in DEFAULT_SWITCHES:
            raise BadRequest(f"unknown switch {json.dumps(key)}; known switches are {sorted(DEFAULT_SWITCHES)}")
        if not isinstance(value, bool):
            raise BadRequest(f"switch {key} must be true or false; got {json.dumps(value)}")
        switches[key] = value
    req["switches"] = switches

    if req["build_dir"] is not None and any(c in req["build_dir"] for c in "'\\\n\r"):
        # KernelBench pastes the path into a single-quoted Python literal.
        raise BadRequest(f"build_dir must not contain quotes, backslashes or newlines; got {req['build_dir']!r}")

    if mode == "judge":
        for key in ("reference_outputs", "candidate_outputs"):
            if not req[key]:
                raise BadRequest(f'judge mode needs "{key}"')
    else:
        if not req["problem_path"]:
            raise BadRequest(f'{mode} mode needs "problem_path"')
        if not os.path.isfile(req["problem_path"]):
            raise BadRequest(f"problem_path {req['problem_path']} is not a file")
    if mode == "candidate":
        if not req["candidate_path"]:
            raise BadRequest('candidate mode needs "candidate_path"')
        if not os.path.isfile(req["candidate_path"]):
            raise BadRequest(f"candidate_path {req['candidate_path']} is not a file")
    if mode == "reference" and not req["reference_outputs"]:
        raise BadRequest('reference mode needs "reference_outputs" (the path to write)')

    if mode != "judge":
        if req["device"] is None:
            req["device"] = "cuda:0" if torch.cuda.is_available() else "cpu"
        req["device_obj"] = _parse_device(req["device"])
    req["dtype"] = PRECISIONS[req["precision"]]
    req["tolerance"] = TOLERANCES[req["precision"]]
    return req


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
    each exclusive turn's wall-clock span (seconds since the epoch), so turns can be compared
    across processes.
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
            self.stats["exclusive_spans"][-1][1] = time.time()
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
            self.stats["exclusive_spans"].append([time.time(), None])
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
_COMPILER_MODULES = ("torch._dynamo.callback", "torch._inductor.compile_fx")


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


# ---------------------------------------------------------------------------------------------
# KernelBench's building blocks (eval.py, timing.py)
# ---------------------------------------------------------------------------------------------


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


def process_input(x, device, dtype, switches):
    """KernelBench _process_input_tensor: every tensor is cast to the precision dtype, then moved.

    Deviation (switch keep_integer_inputs, default on): a tensor that is not floating point
    (int64 targets, bool masks) keeps its dtype and is only moved (KernelBench issue #151).
    """
    if not isinstance(x, torch.Tensor):
        return x
    if switches["keep_integer_inputs"] and not x.is_floating_point():
        return x.to(device=device)
    x = x.to(dtype=dtype)
    return x.to(device=device)


def load_problem(path):
    """KernelBench load_original_model_and_inputs: compile, exec into a fresh dict."""
    with open(path, "r", encoding="utf-8") as f:
        src = f.read()
    context = {}
    try:
        compile(src, "<string>", "exec")
        exec(src, context)
    except BaseException as e:  # noqa: B036 - a problem's SystemExit must not end the harness
        raise ProblemError(f"problem {path} failed to load: {get_error_name(e)}: {e}")
    missing = [n for n in ("Model", "get_init_inputs", "get_inputs") if context.get(n) is None]
    if missing:
        raise ProblemError(f"problem {path} does not define {missing}")
    return src, context, context["Model"], context["get_init_inputs"], context["get_inputs"]


def load_candidate(src, context, backend, build_dir):
    """Returns (ModelNew or None, temp file path or None); raises what exec/import raises."""
    if backend == "triton":
        # KernelBench load_custom_model_with_tempfile: @triton.jit needs the source on disk.
        with tempfile.NamedTemporaryFile(mode="w", suffix=".py", delete=False) as tmp:
            tmp.write(src)
            path = tmp.name
        spec = importlib.util.spec_from_file_location("temp_module", path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
            return getattr(module, "ModelNew"), path
        except BaseException:
            os.remove(path)
            raise
    if build_dir:
        context["BUILD_DIRECTORY"] = build_dir
        src = "import os\n" f"os.environ['TORCH_EXTENSIONS_DIR'] = '{build_dir}'\n" + src
    try:
        compile(src, "<string>", "exec")
        exec(src, context)
    except SyntaxError:
        return None, None
    return context.get("ModelNew"), None


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
        return _PINNED_PERF_COUNTER()

    def synchronize(self, device):
        _PINNED["synchronize"](device=device)

    def empty_cache(self):
        _PINNED["empty_cache"]()

    def events(self):
        return _PINNED["event"](enable_timing=True), _PINNED["event"](enable_timing=True)

    def record(self, event):
        _PINNED["event_record"](event)

    def elapsed(self, start, end):
        return _PINNED["event_elapsed"](start, end)

    def clear_l2_cache(self, device):
        dummy = _PINNED["empty"]((32, 1024, 1024), dtype=torch.int64, device=device)
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


def _round3(x):
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
        "mean": _round3(mean),
        "std": _round3(std),
        "min": _round3(min(elapsed_ms)),
        "max": _round3(max(elapsed_ms)),
        "num_trials": len(elapsed_ms),
        "hardware": hardware_name(device),
        "device": str(device),
    }


def trial_seeds_for(seed, n):
    """run_and_check_correctness: the trial seeds drawn from the run's seed."""
    torch.manual_seed(seed)
    return [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(n)]


# ---------------------------------------------------------------------------------------------
# Output comparison
# ---------------------------------------------------------------------------------------------


def _is_seq(x):
    return isinstance(x, (tuple, list))


def _as_tensor(x):
    return x if isinstance(x, torch.Tensor) else torch.as_tensor(x)


def compare_faithful(output, output_new, tol, compare_tuples):
    """One trial's check as run_and_check_correctness does it; raises what KernelBench raises.

    Returns ("pass", None), ("shape", message) or ("mismatch", (max_diff, avg_diff)). With
    compare_tuples and a tuple/list reference output, each element is checked by the same rules
    (deviation: KernelBench calls .shape on the tuple and the candidate gets a runtime error).
    """
    if compare_tuples and _is_seq(output):
        if not _is_seq(output_new) or len(output_new) != len(output):
            got = f"{type(output_new).__name__} of {len(output_new)}" if _is_seq(output_new) else type(output_new).__name__
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
    if _is_seq(ref):
        if not compare_tuples:
            return False, f"{where}: a tuple/list output (KernelBench's check fails on it; switch compare_tuple_outputs is off)", None
        if not _is_seq(cand) or len(cand) != len(ref):
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
        close = _PINNED["allclose"](ref, cand, atol=tol, rtol=tol)
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
    if _is_seq(x):
        return f"{type(x).__name__} of {len(x)}"
    return type(x).__name__


# ---------------------------------------------------------------------------------------------
# Helpers for the strict checks and the saved outputs
# ---------------------------------------------------------------------------------------------


def _clone_all(values):
    return [_PINNED["clone"](v) if isinstance(v, torch.Tensor) else v for v in values]


# The judge's files hold whole output tensors up to this many elements; a larger tensor is saved as
# a sample of this many elements at positions that depend only on its element count, the same in
# both processes (KernelBench's level-1 GEMMs return 4 GiB outputs: five trials and the rotations,
# whole, on both sides, would need tens of GiB of disk per job). HARNESS.md, "judge".
JUDGE_SAMPLE_ELEMENTS = 1 << 24


def _sample_positions(numel, k):
    g = torch.Generator().manual_seed(0x5A3D1E ^ numel)
    return torch.randint(numel, (k,), generator=g)


def _to_saveable(x, sample=False):
    """Output -> something torch.load(weights_only=True) reads: cpu tensors, tuples, lists, numbers.

    With sample, a tensor of more than JUDGE_SAMPLE_ELEMENTS elements becomes
    {"ak_sampled": 1, "shape", "dtype", "numel", "values"}."""
    if isinstance(x, torch.Tensor):
        x = _PINNED["detach"](x)
        if sample and x.numel() > JUDGE_SAMPLE_ELEMENTS:
            pos = _sample_positions(x.numel(), JUDGE_SAMPLE_ELEMENTS).to(x.device)
            values = x.reshape(-1)[pos]
            return {"ak_sampled": 1, "shape": list(x.shape), "dtype": str(x.dtype), "numel": x.numel(),
                    "values": _PINNED["clone"](_PINNED["cpu"](values))}
        return _PINNED["clone"](_PINNED["cpu"](x))
    if isinstance(x, tuple):  # also torch.return_types (structseq)
        return tuple(_to_saveable(v, sample) for v in x)
    if isinstance(x, list):
        return [_to_saveable(v, sample) for v in x]
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    raise TypeError(f"output of type {type(x).__name__} cannot be saved (expected tensors, tuples, lists, numbers)")


def _bitwise_equal(a, b):
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.dtype != b.dtype or a.shape != b.shape or a.device != b.device:
            return False
        return _PINNED["equal"](_bytes_view(a), _bytes_view(b))
    if _is_seq(a) and _is_seq(b):
        return len(a) == len(b) and all(_bitwise_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return False
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _bytes_view(t):
    t = _PINNED["detach"](t)
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.contiguous().reshape(-1).view(torch.uint8)


def _checksum(values):
    h = hashlib.sha256()
    for v in values:
        if isinstance(v, torch.Tensor):
            h.update(f"tensor {v.dtype} {tuple(v.shape)};".encode())
            # A view, not .tobytes(): no copy of a GiB-sized input (7x faster, half the memory).
            h.update(memoryview(_PINNED["cpu"](_bytes_view(v)).numpy()))
        else:
            h.update(f"{type(v).__name__} {v!r};".encode())
    return h.hexdigest()


def _tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if _is_seq(x):
        return [t for v in x for t in _tensors(v)]
    return []


def _poison_values_appeared(poisoned, clean):
    """True where the poisoned call shows a poison value (NaN/inf, or an integer type's maximum)
    at a position the clean call did not."""
    for p, c in zip(_tensors(poisoned), _tensors(clean)):
        if p.shape != c.shape or p.dtype != c.dtype:
            continue
        if p.is_floating_point() or p.is_complex():
            if bool((~_PINNED["isfinite"](p) & _PINNED["isfinite"](c)).any()):
                return True
        elif p.dtype != torch.bool:
            top = torch.iinfo(p.dtype).max
            if bool(((p == top) & (c != top)).any()):
                return True
    return False


def _write_json_atomic(path, obj):
    text = json.dumps(_json_safe(obj), indent=1, sort_keys=True, allow_nan=False)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.write("\n")
    os.replace(tmp, path)


def _save_atomic(path, obj):
    tmp = f"{path}.tmp.{os.getpid()}"
    _PINNED["save"](obj, tmp)
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


def describe(x):
    """Inspect mode's description of one input or output value."""
    if isinstance(x, torch.Tensor):
        return {"kind": "tensor", "dtype": str(x.dtype), "shape": list(x.shape)}
    if isinstance(x, bool) or isinstance(x, (int, float)):
        return {"kind": "scalar", "type": type(x).__name__, "value": x}
    if _is_seq(x):
        return {"kind": type(x).__name__, "items": [describe(v) for v in x]}
    if x is None:
        return {"kind": "none"}
    return {"kind": "other", "type": type(x).__name__, "repr": repr(x)[:200]}


# ---------------------------------------------------------------------------------------------
# Static scan: KernelBench kernel_static_checker.py (validate_kernel_static), by category
# ---------------------------------------------------------------------------------------------


def _strip_comments(code):
    lines = []
    for line in code.split("\n"):
        if "#" in line:
            line = line[: line.index("#")]
        if "//" in line:
            line = line[: line.index("//")]
        lines.append(line)
    return "\n".join(lines)


_TORCH_COMPUTATION_OPS = [
    "torch.mm", "torch.bmm", "torch.matmul", "torch.einsum",
    "torch.conv1d", "torch.conv2d", "torch.conv3d", "torch.conv",
    "torch.conv_transpose1d", "torch.conv_transpose2d", "torch.conv_transpose3d",
    "torch.avg_pool1d", "torch.avg_pool2d", "torch.avg_pool3d",
    "torch.max_pool1d", "torch.max_pool2d", "torch.max_pool3d",
    "torch.adaptive_avg_pool1d", "torch.adaptive_avg_pool2d", "torch.adaptive_avg_pool3d",
    "torch.adaptive_max_pool1d", "torch.adaptive_max_pool2d", "torch.adaptive_max_pool3d",
    "torch.relu", "torch.hardtanh", "torch.elu", "torch.selu",
    "torch.leaky_relu", "torch.gelu", "torch.softsign", "torch.softplus",
    "torch.softmax", "torch.log_softmax", "torch.tanh", "torch.sigmoid",
    "torch.hardsigmoid", "torch.silu", "torch.mish",
    "torch.batch_norm", "torch.group_norm", "torch.layer_norm",
    "torch.instance_norm", "torch.rms_norm", "torch.normalize",
    "torch.linear", "torch.cross_entropy", "torch.kl_div", "torch.mse_loss",
    "torch.huber_loss", "torch.triplet_margin_loss", "torch.cosine_similarity",
    "torch.logsumexp", "torch.clamp", "torch.dropout",
]

_SCAN_PATTERNS = {
    "code_bypass": [r"\btry\s*:", r"\bexcept\s*:", r"\bexcept\s+\w+", r"\bpass\b"],
    "timing_event_patch": [
        r"torch\.cuda\.Event\.record\s*=", r"torch\.cuda\.Event\.elapsed_time\s*=",
        r"torch\.cuda\.synchronize\s*=", r"torch\.cuda\.Event\s*=", r"time\.perf_counter\s*=",
        r"time\.time\s*=",
    ],
    "thread_injection": [
        r"threading\.Thread\s*\(", r"import\s+threading", r"from\s+threading\s+import",
        r"multiprocessing\.(Process|Pool|Manager|Queue|Pipe)", r"import\s+multiprocessing",
        r"concurrent\.futures", r"ThreadPoolExecutor", r"ProcessPoolExecutor",
    ],
    "lazy_eval": [r"_make_subclass", r"class\s+\w+.*\(torch\.Tensor\)", r"class\s+\w+.*\(Tensor\)",
                  r"torch\.Tensor\.__new__"],
    "pytorch_wrap": [r"torch\.nn\.(?!(Module|parameter|Parameter|ParameterList|ParameterDict|ModuleList|ModuleDict|init)\b)"],
    "torch_computation_ops": [
        r"\b(" + "|".join(re.escape(f) for f in _TORCH_COMPUTATION_OPS) + r")(?=\s*\(|\s|$)",
        r"torch\.nn\.functional\.\w+", r"\bnn\.functional\.\w+",
        r"\bF\.(conv|linear|relu|gelu|softmax|batch_norm|layer_norm|dropout|max_pool|avg_pool)",
    ],
    "stream_injection": [r"torch\.cuda\.Stream\s*\(", r"cuda\.Stream\s*\(", r"with\s+torch\.cuda\.stream",
                         r"\.wait_stream\s*\(", r"\.record_stream\s*\("],
    "precision_downgrade": [
        r"__float2half(_rn)?\s*\(", r"\(\s*__half\s*\)\s*[\w\->\.]+", r"static_cast\s*<\s*(__half|half)\s*>\s*\(",
        r"tl\.astype\s*\(\s*[^,]+,\s*tl\.float16\s*\)", r"NumericConverter\s*<\s*half_t\s*,\s*float\s*>",
        r"LinearCombination\s*<\s*half_t", r"type_convert\s*<\s*half_t\s*>\s*\(", r"tk::half\s*\(",
        r"\.half\s*\(", r"\.float16\s*\(", r"\.to\s*\(\s*torch\.(float16|half)\b",
        r"\.to\s*\(\s*dtype\s*=\s*torch\.(float16|half)\b",
    ],
}
_STRICT_CATEGORIES = ("code_bypass", "timing_event_patch", "thread_injection", "lazy_eval")
_WARNING_CATEGORIES = ("pytorch_wrap", "torch_computation_ops", "stream_injection", "precision_downgrade")


def static_scan(code, backend, precision):
    """{"errors": [category...], "warnings": [category...], "matches": {category: text}}."""
    code = _strip_comments(code)
    errors, warns, matches = [], [], {}
    for category in _STRICT_CATEGORIES + _WARNING_CATEGORIES:
        if category == "precision_downgrade" and precision != "fp32":
            continue
        for pattern in _SCAN_PATTERNS[category]:
            m = re.search(pattern, code)
            if m:
                (errors if category in _STRICT_CATEGORIES else warns).append(category)
                matches[category] = m.group(0)
                break
    if backend == "cuda":
        if "__global__" not in code:
            errors.append("cuda_impl")
            matches["cuda_impl"] = "missing __global__ kernel definition"
        elif not any(p in code for p in ("load_inline", "cpp_extension")):
            errors.append("cuda_impl")
            matches["cuda_impl"] = "missing load_inline or cpp_extension"
    elif backend == "triton":
        if not re.search(r"@triton\.(jit|autotune)", code):
            errors.append("triton_impl")
            matches["triton_impl"] = "missing @triton.jit or @triton.autotune"
        elif not re.search(r"\btl\.\w+", code):
            errors.append("triton_impl")
            matches["triton_impl"] = "no tl.* operations"
    return {"errors": sorted(errors), "warnings": sorted(warns), "matches": matches}


# ---------------------------------------------------------------------------------------------
# Monkeypatch detection (strict): which torch/time functions or problem classes were rebound
# ---------------------------------------------------------------------------------------------


def _patch_targets(context, original_model):
    import torch.nn.functional as F

    targets = [("torch", torch), ("torch.nn.functional", F), ("torch.Tensor", torch.Tensor),
               ("torch.nn.Module", nn.Module), ("torch.cuda", torch.cuda), ("time", time),
               ("torch.linalg", torch.linalg), ("torch.fft", torch.fft), ("torch.special", torch.special)]
    if hasattr(torch.cuda, "Event"):
        targets.append(("torch.cuda.Event", torch.cuda.Event))
    for name in dir(nn):
        cls = getattr(nn, name)
        if isinstance(cls, type) and issubclass(cls, nn.Module) and cls is not nn.Module:
            targets.append((f"torch.nn.{name}", cls))
    for name, value in context.items():  # the problem's own classes (Model, helpers)
        if isinstance(value, type):
            targets.append((name, value))
    targets.append(("<reference model instance>", original_model))
    return targets


def _is_patchable(value):
    return callable(value) or isinstance(value, (staticmethod, classmethod, property))


def take_patch_snapshot(context, original_model):
    """What patched_names compares against: each target's callables, and for classes and the
    reference instance also the set of names (a new forward or __call__ shadows an inherited one;
    modules gain attributes legitimately when torch imports submodules lazily)."""
    snap = []
    for tname, obj in _patch_targets(context, original_model):
        try:
            attrs = vars(obj)
        except TypeError:
            continue
        entries = {attr: value for attr, value in list(attrs.items()) if _is_patchable(value)}
        names = None if isinstance(obj, types.ModuleType) else set(attrs.keys())
        snap.append((tname, obj, entries, names))
    return snap


def patched_names(snapshot):
    changed = []
    for tname, obj, entries, names in snapshot:
        attrs = vars(obj)
        changed += [f"{tname}.{a}" for a, v in entries.items() if attrs.get(a, _MISSING) is not v]
        if names is not None:
            changed += [f"{tname}.{a}" for a in set(attrs.keys()) - names if _is_patchable(attrs[a])]
    return sorted(changed)


_MISSING = object()


# ---------------------------------------------------------------------------------------------
# Modes
# ---------------------------------------------------------------------------------------------


def _build_reference(req, context_tuple):
    """set_seed; init inputs; no_grad: set_seed, Model(*init); .to(device, dtype)."""
    _, _, Model, get_init_inputs, _ = context_tuple
    device, dtype, switches, seed = req["device_obj"], req["dtype"], req["switches"], req["seed"]
    set_seed(seed)
    init_inputs = [process_input(x, device, dtype, switches) for x in get_init_inputs()]
    with torch.no_grad():
        set_seed(seed)
        model = Model(*init_inputs)
        assert hasattr(model, "forward")
    return model, init_inputs


def _inputs_for(seed, get_inputs, req, checksum=None):
    """set_seed; get_inputs(); process_input each. get_inputs (KernelBench's build GiB-sized tensors
    on the CPU, seconds each) and the checksum run with no turn held: a process that held its shared
    turn through them would keep a waiting timing, and through the gate every other process's shared
    turn, waiting as long. The turn held before is taken again (through the gate) for the move to
    the device. With checksum, a list to which the inputs' checksum is appended: the checksum is of
    the inputs as get_inputs made them, before the cast to the request's dtype (process_input is a
    function of them). A problem whose get_inputs makes tensors on the GPU makes them with no turn
    held (none of KernelBench's does); their checksum is taken back in the turn."""
    lock = req["lock"]
    held = lock.mode
    if held == "shared":
        synchronize(req["device_obj"])  # this process's GPU work ends inside its turn
        lock.enter(None)
    try:
        set_seed(seed)
        raw = list(get_inputs())
        on_cpu = not any(isinstance(x, torch.Tensor) and x.device.type != "cpu" for x in raw)
        if checksum is not None and on_cpu:
            checksum.append(_checksum(raw))
    finally:
        lock.enter(held)
    if checksum is not None and not on_cpu:  # a problem that makes its inputs on the GPU: in the turn
        checksum.append(_checksum(raw))
    return [process_input(x, req["device_obj"], req["dtype"], req["switches"]) for x in raw]


def run_inspect(req):
    device, dtype, switches, seed = req["device_obj"], req["dtype"], req["switches"], req["seed"]
    try:
        loaded = load_problem(req["problem_path"])
        _, _, Model, get_init_inputs, get_inputs = loaded
        set_seed(seed)
        raw_inputs = get_inputs()
        set_seed(seed)
        raw_init = get_init_inputs()
        init_inputs = [process_input(x, device, dtype, switches) for x in raw_init]
        with torch.no_grad():
            set_seed(seed)
            model = Model(*init_inputs).to(device=device, dtype=dtype)
            inputs = [process_input(x, device, dtype, switches) for x in raw_inputs]
            set_seed(seed)
            output = model(*inputs)
            synchronize(device)
        outputs = [describe(o) for o in output] if _is_seq(output) else [describe(output)]
        return {
            "ok": True,
            "inputs": [describe(x) for x in raw_inputs],
            "init_inputs": [describe(x) for x in raw_init],
            "parameters": sum(p.numel() for p in model.parameters()),
            "parameter_tensors": len(list(model.parameters())),
            "outputs": outputs,
            "output_structure": type(output).__name__ if _is_seq(output) else "tensor",
            "device": str(device),
            "precision": req["precision"],
            "switches": switches,
        }
    except BaseException as e:  # noqa: B036 - the problem's code may raise anything
        return {"ok": False, "error": f"{get_error_name(e)}: {e}",
                "traceback": traceback.format_exc()[-4000:]}


def run_reference(req):
    """The reference outputs, computed in a process that never loads candidate code."""
    device = req["device_obj"]
    try:
        loaded = load_problem(req["problem_path"])
        get_inputs = loaded[4]
        model, _ = _build_reference(req, loaded)
        req["lock"].enter("shared")  # to the end: this process measures nothing
        model = model.to(device=device, dtype=req["dtype"])
        trial_seeds = trial_seeds_for(req["seed"], req["num_correct_trials"])
        rotation_seeds = [req["seed"] + 1 + r for r in range(req["rotations"])]
        saved = {"format": HARNESS_VERSION, "kind": "reference", "meta": _outputs_meta(req),
                 "trial_seeds": trial_seeds, "rotation_seeds": rotation_seeds,
                 "outputs": [], "rotation_outputs": [], "input_checksums": [], "rotation_input_checksums": []}
        with torch.no_grad():
            for key, seeds in (("outputs", trial_seeds), ("rotation_outputs", rotation_seeds)):
                for s in seeds:
                    inputs = _inputs_for(s, get_inputs, req,
                                         saved["input_checksums" if key == "outputs" else "rotation_input_checksums"])
                    set_seed(s)
                    out = model(*_clone_all(inputs))
                    synchronize(device)
                    saved[key].append(_to_saveable(out, sample=True))
        _save_atomic(req["reference_outputs"], saved)
        return {"ok": True, "trials": len(trial_seeds), "rotations": len(rotation_seeds),
                "trial_seeds": trial_seeds, "reference_outputs": req["reference_outputs"],
                "device": str(device), "precision": req["precision"], "switches": req["switches"]}
    except BaseException as e:  # noqa: B036
        return {"ok": False, "error": f"{get_error_name(e)}: {e}", "traceback": traceback.format_exc()[-4000:]}


def _outputs_meta(req):
    return {"precision": req["precision"], "seed": req["seed"], "switches": req["switches"],
            "num_correct_trials": req["num_correct_trials"], "rotations": req["rotations"],
            "device": str(req["device_obj"])}


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
    phases = {"start": round(time.monotonic() - _STARTED, 3)}  # importing torch, reading the request
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
        for module in _COMPILER_MODULES:
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
            inputs = [_cast_baseline(x, device, dtype, switches) for x in inputs]
            init_inputs = [_cast_baseline(x, device, dtype, switches) for x in init_inputs]
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
                    timer=_timer_name(device), phases_s=phases)
    except BaseException as e:  # noqa: B036
        return dict(base, ok=False, error=f"{get_error_name(e)}: {e}", traceback=traceback.format_exc()[-4000:],
                    phases_s=phases)


def _cast_baseline(x, device, dtype, switches):
    if not isinstance(x, torch.Tensor):
        return x
    if switches["keep_integer_inputs"] and not x.is_floating_point():
        return x.to(device=device)
    return x.to(device=device, dtype=dtype)


def _timer_name(device):
    return "cuda_event" if device.type == "cuda" else "host_perf_counter"


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


# --- candidate mode ----------------------------------------------------------------------------


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
        "num_warmup": req["num_warmup"], "timer": _timer_name(device), "retryable": False, "strict": None,
    }
    with open(req["candidate_path"], "r", encoding="utf-8", errors="replace") as f:
        candidate_src = f.read()
    scan = static_scan(candidate_src, backend, req["precision"])

    # The problem: everything up to here is the problem's own code; a failure is not a verdict.
    loaded = load_problem(req["problem_path"])
    context, get_inputs = loaded[1], loaded[4]
    try:
        original_model, init_inputs = _build_reference(req, loaded)
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
                inputs = _inputs_for(seed, get_inputs, req)
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
            inputs = _inputs_for(seed, get_inputs, req)
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
            result["strict"] = _strict_checks(req, result, scan, snapshot, custom_model, get_inputs, trial_seeds)
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
            inputs = _inputs_for(trial_seed, get_inputs, req)
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


def _strict_checks(req, result, scan, snapshot, custom_model, get_inputs, trial_seeds):
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
    saved = {"format": HARNESS_VERSION, "kind": "candidate", "meta": _outputs_meta(req),
             "trial_seeds": trial_seeds, "rotation_seeds": rotation_seeds, "outputs": [], "rotation_outputs": [],
             "input_checksums": [], "rotation_input_checksums": [], "errors": {"outputs": [], "rotation_outputs": []}}
    mutated = []
    with torch.no_grad():
        for key, seeds, label in (("outputs", trial_seeds, "trial"), ("rotation_outputs", rotation_seeds, "rotation")):
            for i, s in enumerate(seeds):
                try:
                    inputs = _inputs_for(s, get_inputs, req,
                                         saved["input_checksums" if key == "outputs" else "rotation_input_checksums"])
                    pristine, given = _clone_all(inputs), _clone_all(inputs)
                    set_seed(s)
                    out = call(given)
                    synchronize(device)
                    if not all(_bitwise_equal(a, b) for a, b in zip(given, pristine)):
                        mutated.append(f"{label} {i}")
                    saved[key].append(_to_saveable(out, sample=True))
                    saved["errors"][key].append(None)
                except (Exception, SystemExit) as e:
                    saved[key].append(None)
                    saved["errors"][key].append(f"{get_error_name(e)}: {str(e)[:RUNTIME_ERROR_MAX_CHARS]}")
    strict["input_mutation"] = bool(mutated)
    strict["input_mutation_calls"] = mutated
    if req["candidate_outputs"]:
        try:
            _save_atomic(req["candidate_outputs"], saved)
            strict["outputs_saved"] = True
        except Exception as e:
            strict["check_errors"]["candidate_outputs"] = f"{get_error_name(e)}: {e}"
    output_errors = [e for errs in saved["errors"].values() for e in errs if e]
    if output_errors:
        strict["check_errors"]["outputs"] = output_errors[0]

    first_inputs = _inputs_for(trial_seeds[0], get_inputs, req)

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
            strict["rotated_timing"] = _rotated_timing(custom_model, get_inputs, rotation_seeds,
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
        clean = _to_saveable(call(_clone_all(inputs)))
        synchronize(device)
        clean2 = _to_saveable(call(_clone_all(inputs)))
        synchronize(device)
        deterministic = _bitwise_equal(clean, clean2)

        # (a) Allocator poisoning: blocks of the sizes the call uses, filled with 0xFF (NaN in
        # fp32/fp16/bf16, -1 in integers) and freed so the allocator hands them back.
        sizes = sorted({t.numel() * t.element_size() for t in _tensors(clean) + _tensors(inputs)} | {64 << 20})
        blocks = []
        for nbytes in sizes:
            for _ in range(2):
                blocks.append(torch.full((max(nbytes, 1),), 255, dtype=torch.uint8, device=device))
        synchronize(device)
        del blocks
        poisoned_a = _to_saveable(call(_clone_all(inputs)))
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
                given = _clone_all(inputs)
                poisoned_b = _to_saveable(call(given))
                synchronize(device)
        finally:
            set_deterministic(prev_enabled, warn_only=prev_warn)
            det.fill_uninitialized_memory = prev_fill
    changed_a = not _bitwise_equal(poisoned_a, clean)
    values_a = _poison_values_appeared(poisoned_a, clean)
    values_b = _poison_values_appeared(poisoned_b, clean)
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
        sizes = [t.numel() * t.element_size() for t in _tensors(call(_clone_all(inputs)))]
        _PINNED["synchronize"](device=device)
        previous = None
        for _ in range(3):
            blocks = [torch.full((max(n, 1),), 255, dtype=torch.uint8, device=device) for n in sizes]
            del blocks
            given = _clone_all(inputs)
            before = _PINNED["current_stream"](device)
            _PINNED["synchronize"](device=device)
            out = call(given)
            after = _PINNED["current_stream"](device)
            stream_changed = stream_changed or after != before
            before.synchronize()
            copy = [_PINNED["clone"](t) for t in _tensors(out)]
            _PINNED["synchronize"](device=device)
            if not all(_bitwise_equal(c, t) for c, t in zip(copy, _tensors(out))):
                escaped = True
            previous = (given, out, copy)  # noqa: F841 - held so the next output gets other memory
    detail = {"escaped_current_stream": escaped, "current_stream_changed": stream_changed,
              "source_uses_streams": "stream_injection" in scan["warnings"]}
    return bool(escaped or stream_changed), detail


def _rotated_timing(custom_model, get_inputs, rotation_seeds, expected, req, faithful_ms):
    """Rotated inputs, timed in alternation with the faithful setting.

    Even calls repeat one fixed input set (the perf inputs, the same tensors every call, as in
    KernelBench's timing); odd calls take a fresh clone of the next rotation set (made outside
    the timed region) and their outputs are checked against the candidate's own rotation outputs.
    Alternating makes both halves see the same machine state, so their ratio survives noise that
    a comparison with the earlier faithful run would not (a loaded CPU, clocks).
    """
    device, tol = req["device_obj"], req["tolerance"]
    compare_tuples = req["switches"]["compare_tuple_outputs"]
    same = _inputs_for(req["seed"], get_inputs, req)
    sets = [_inputs_for(s, get_inputs, req) for s in rotation_seeds]
    expected_dev = [_to_device(e, device) for e in expected]
    n_sets = len(sets)
    consistent = [True]
    scratch = [None]

    def args_for(i):
        # Both halves make the same clone (so allocator and cache state match); even calls
        # keep it aside for as long as an odd call keeps its arguments, and pass the fixed set.
        clone = _clone_all(sets[(i // 2) % n_sets])
        if i % 2 == 1:
            scratch[0] = None
            return clone
        scratch[0] = clone
        return same

    def after(i, out):
        if i % 2 == 1:
            expect = expected_dev[(i // 2) % n_sets]
            # The saved outputs of large tensors are samples: sample this output alike.
            got = _to_saveable(out, sample=True) if _has_sample(expect) else _detached(out)
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
    paired = _median(rotated) / _median(fixed) if _median(fixed) > 0 else float("inf")
    return {"mean_ms": _round3(rotated_mean), "median_ms": _round3(_median(rotated)),
            "same_inputs_mean_ms": _round3(math.fsum(fixed) / len(fixed)),
            "same_inputs_median_ms": _round3(_median(fixed)),
            "ratio": round(rotated_mean / faithful_ms, 4), "paired_median_ratio": round(paired, 4),
            "stats": timing_stats(rotated, device), "sets": n_sets, "trials_per_set": req["rotation_perf_trials"],
            "outputs_consistent": consistent[0]}


def _has_sample(x):
    if isinstance(x, dict):
        return bool(x.get("ak_sampled"))
    return _is_seq(x) and any(_has_sample(v) for v in x)


def _median(values):
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _to_device(x, device):
    if isinstance(x, torch.Tensor):
        return x.to(device=device)
    if _is_seq(x):
        return type(x)(_to_device(v, device) for v in x)
    return x


def _detached(x):
    if isinstance(x, torch.Tensor):
        return _PINNED["detach"](x)
    if isinstance(x, list):
        return [_detached(v) for v in x]
    if isinstance(x, tuple):
        return tuple(_detached(v) for v in x)
    return x


# ---------------------------------------------------------------------------------------------


_MODE_FUNCTIONS = {"inspect": run_inspect, "reference": run_reference, "candidate": run_candidate,
                   "judge": run_judge, "baseline": run_baseline}


def main(argv):
    if len(argv) != 2:
        print("usage: harness.py REQUEST_JSON_PATH (see kernelbench/HARNESS.md)", file=sys.stderr)
        return 2
    try:
        req = load_request(argv[1])
    except BadRequest as e:
        print(f"harness: bad request: {e}", file=sys.stderr)
        return 2
    req["lock"] = GpuLock(req["gpu_lock"]) if req["mode"] != "judge" else GpuLock(None)
    try:
        result = _MODE_FUNCTIONS[req["mode"]](req)
    except ProblemError as e:
        print(f"harness: bad request: {e}", file=sys.stderr)
        return 2
    result = dict(result, mode=req["mode"], harness_version=HARNESS_VERSION, torch_version=torch.__version__)
    lock = req["lock"]
    if lock.active:
        lock.enter(None)  # the turn ends here (a candidate's threads may run on until the exit)
        result["gpu_lock"] = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in lock.stats.items()}
    _write_json_atomic(req["result_path"], result)
    return 0


def _exit_code(fn, *args):
    """fn(*args) as a process's whole life (main for a step, serve for the fork server): its exit
    code, 1 with the traceback on stderr if it raised, after flushing stdout and stderr; never
    raises. The caller leaves with os._exit(code): threads the candidate started, atexit hooks it
    registered and CUDA teardown can neither delay the exit nor touch the result after it was
    written."""
    try:
        code = fn(*args)
    except BaseException:  # noqa: B036 - anything left is the harness's own failure
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: B036
        pass
    return code


def _cuda_driver_loaded():
    """Whether libcuda is mapped into this process: the driver was loaded (and maybe initialised),
    after which a forked child cannot use CUDA."""
    with open("/proc/self/maps") as f:
        return any("libcuda.so" in line for line in f)


def serve():
    """The fork server (HARNESS.md, "Fork server"): torch, dynamo and inductor imported once, then
    one forked child per step, so a step starts in milliseconds instead of seconds. Reads one
    request per line on stdin, {"request": REQUEST_JSON_PATH, "log": LOG_PATH}; the child leads a
    process group of its own (set by both sides, so it exists before it is announced), writes its
    stdout and stderr to the log, and runs main() as a fresh process would. Writes "ready" when it
    can serve, "started <pid>" per step and "exited <pid> <code>" when the step ends (code as a
    shell gives it: 128 + signal for a killed step), and exits at the end of stdin. Refuses to serve
    ("refused <reason>", exit 3) when CUDA's driver is already loaded here: the parent of a fork
    must never have touched CUDA."""
    import ctypes
    import signal as signals
    for module in _COMPILER_MODULES:
        importlib.import_module(module)
    if torch.cuda.is_initialized() or _cuda_driver_loaded():
        print("refused CUDA's driver is loaded in the fork server", flush=True)
        return 3
    libc = ctypes.CDLL(None, use_errno=True)
    # What the imports made moves out of the collector's reach: a collection in a child would
    # otherwise walk, and so copy page by page, the whole inherited heap (a 7 us CPU op timed at
    # 13 us in a child without this).
    gc.collect()
    gc.freeze()
    print("ready", flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            order = json.loads(line)
            request, log = str(order["request"]), str(order["log"])
        except (ValueError, KeyError, TypeError) as e:
            print(f"bad order {e!r}", flush=True)
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.setpgid(0, 0)
                libc.prctl(1, signals.SIGKILL)  # PR_SET_PDEATHSIG: gone with the server
                if os.getppid() != server:  # the server died before the line above
                    os._exit(1)
                signals.signal(signals.SIGINT, signals.SIG_DFL)
                fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.close(fd)
                os.close(null)
                sys.stdin = open(os.devnull)
                global _STARTED
                _STARTED = time.monotonic()  # the step's "start" phase begins at the fork
                code = _exit_code(main, ["harness.py", request])
            except BaseException:  # noqa: B036 - before the log was open: the server's stderr
                traceback.print_exc()
            finally:
                os._exit(code)
        try:
            os.setpgid(pid, pid)
        except OSError:  # the child has set it already, or has exited
            pass
        print(f"started {pid}", flush=True)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        print(f"exited {pid} {code if code >= 0 else 128 - code}", flush=True)
    return 0


if __name__ == "__main__":
    os._exit(_exit_code(serve) if sys.argv[1:] == ["--serve"] else _exit_code(main, sys.argv))
