"""Witness mode (HARNESS.md, "witness"): the candidate timed and checked from outside its process.

The witness never loads candidate code. It starts two runners, fresh Pythons that it feeds one
frame at a time: one runs the candidate's ModelNew, the other the problem's Model, both built as
the faithful evaluation builds them. For every round the witness draws a seed nobody else knows,
makes that round's inputs, computes the reference outputs itself, writes the inputs into buffers it
shares with the runner and poisons the runner's output buffers with NaN; then it reads its clock,
says "run", and reads it again when the runner answers "done". Every output the runner wrote is
compared with the witness's own reference before the round counts. The runner cannot see inputs
before its clock starts, cannot stop the clock without having written outputs that pass, and cannot
reach the witness's memory (not dumpable; the sandbox denies ptrace). The result is authenticated
with a key the worker gives the witness alone (HMAC-SHA256 over the result's text).
"""

import ctypes
import hashlib
import hmac
import json
import os
import secrets
import select
import subprocess
import sys
import time

import torch

from .gpu_lock import exclusive_turn
from .problem import build_reference, inputs_for, load_problem
from .request import TOLERANCES
from .runner import ANSWER_MAX_BYTES, Unsupported, flat_outputs, frame, make_buffer, nbytes, slot_views, view
from .timing import LIVE_CLOCK, median, set_seed, synchronize, time_calls, timing_stats

KEY_ENV = "AK_WITNESS_KEY"
WARMUP_ROUNDS = 2
CALLS_PER_ROUND_MAX = 64  # a round of many calls spreads the pipe and the synchronisation
SLOT_BUDGET_BYTES = {"cuda": 512 << 20, "cpu": 8 << 20}


class RunnerFailed(Exception):
    """The runner died, answered something other than the protocol, or said it failed."""


class Runner:
    """One runner process, as the witness sees it: frames go down its stdin, and its answers are read
    from its stdout one byte at a time, unbuffered, so that nothing it wrote ahead hides in a buffer."""

    def __init__(self, harness, log_path, env, fd):  # fd: the CPU block's memfd, or None
        # O_NOFOLLOW: the job's folder is the earlier steps' to write; a link planted there is refused.
        self.log = os.fdopen(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644), "ab")
        # Its own process group, killed whole at close; it dies with the witness too
        # (PR_SET_PDEATHSIG, set by the runner). -s: no user site (HOME is the job's folder).
        self.proc = subprocess.Popen([sys.executable, "-s", harness, "--witness-runner"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, close_fds=True, env=env, bufsize=0,
                                     start_new_session=True, pass_fds=(fd,) if fd is not None else ())
        self.out = self.proc.stdout.fileno()

    def send(self, obj):
        self.send_bytes(frame(obj))

    def send_bytes(self, data):
        try:
            while data:
                data = data[os.write(self.proc.stdin.fileno(), data):]
        except OSError as e:
            raise RunnerFailed(f"the runner is gone ({e})")

    def answer(self, within_s=None):
        """The runner's next line; RunnerFailed when it has not ended within `within_s` seconds."""
        line = bytearray()
        deadline = None if within_s is None else time.monotonic() + within_s
        while len(line) < ANSWER_MAX_BYTES:
            if deadline is not None and not select.select([self.out], [], [], max(0.0, deadline - time.monotonic()))[0]:
                raise RunnerFailed(f"the runner did not answer within {within_s:.3g} s")
            b = os.read(self.out, 1)
            if not b:
                raise RunnerFailed(f"the runner ended (exit code {self.proc.poll()})")
            if b == b"\n":
                break
            line += b
        text = line.decode("utf-8", "replace")
        if text.startswith("error "):
            raise RunnerFailed(f"the runner failed: {text[6:][:500]}")
        return text

    def expect(self, word):
        got = self.answer()
        if got != word:
            raise RunnerFailed(f"the runner answered {got[:200]!r} where {word!r} was due")

    def quiet(self):
        """Nothing may be waiting from the runner before it is asked: an answer written ahead of
        its order would stop the clock before the work."""
        if select.select([self.out], [], [], 0)[0]:
            raise RunnerFailed("the runner answered before it was asked")

    def close(self):
        try:
            os.killpg(self.proc.pid, 9)
        except OSError:
            pass
        self.proc.wait()
        self.log.close()


# ---------------------------------------------------------------------------------------------
# The witness
# ---------------------------------------------------------------------------------------------


def _not_dumpable():
    """No process of this uid may ptrace this one or read its memory, environment or descriptors."""
    if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE, 0
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed: the witness will not run dumpable")


def _signature(inputs):
    """What every round's inputs must share: tensors' shapes and dtypes, plain values."""
    sig = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            if not x.is_contiguous():
                raise Unsupported("get_inputs() gives a non-contiguous tensor; the slots hold contiguous ones")
            sig.append(("t", tuple(x.shape), x.dtype))
        elif x is None or isinstance(x, (bool, int, float, str)):
            sig.append(("v", x))
        else:
            raise Unsupported(f"get_inputs() gives a {type(x).__name__}; only tensors and plain values go through")
    return sig


ALIGN = 256


class _Rounds:
    """The buffers of a round, in one shared block: the inputs of its `calls` calls first, then their
    outputs, so that the witness moves each round's inputs in with one copy and its outputs out with
    another (the hand-over both runners pay, kept small and steady). `staging` holds the next
    round's inputs in the block's layout, `snapshot` the outputs copied out; both are the witness's
    own memory."""

    def __init__(self, req, signature, out_meta, calls):
        layout, offset = [], 0

        def place(shape, dtype):
            nonlocal offset
            at = offset
            offset += -(-nbytes(shape, dtype) // ALIGN) * ALIGN
            return at

        for _ in range(calls):
            layout.append({"inputs": [("v", sig[1]) if sig[0] == "v" else ("t", place(sig[1], sig[2]), sig[1], sig[2])
                                      for sig in signature]})
        self.inputs_end = offset
        for s in layout:
            s["outputs"] = [(place(shape, dtype), shape, dtype) for shape, dtype in out_meta]
        device = req["device_obj"]
        self.block, desc, self.fd = make_buffer(device, offset)
        self.slots = slot_views(self.block, layout)
        self.staging = torch.empty(max(self.inputs_end, 1), dtype=torch.uint8, device=device)
        self.snapshot = torch.empty(max(offset - self.inputs_end, 1), dtype=torch.uint8, device=device)
        self.staged = [[None if d[0] == "v" else view(self.staging, *d[1:]) for d in s["inputs"]] for s in layout]
        self.copied_out = [[view(self.snapshot, o[0] - self.inputs_end, *o[1:]) for o in s["outputs"]]
                           for s in layout]
        self.setup = {"block": desc, "slots": layout}

    def close_fd(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _poison(t):
    if t.is_floating_point() or t.is_complex():
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(torch.iinfo(t.dtype).max)


def _matches(ref, got, tol):
    if ref.is_floating_point():
        # A reference value below the dtype's smallest normal that comes back as zero (flush-to-zero)
        # is within atol: every tolerance is far above the smallest normal.
        return bool(torch.allclose(ref.float(), got.float(), atol=tol, rtol=tol))
    if ref.is_complex():
        return bool(torch.allclose(ref, got, atol=tol, rtol=tol))
    return bool(torch.equal(ref, got))


def run_witness(req):
    _not_dumpable()
    key = os.environ.pop(KEY_ENV, "")
    device = req["device_obj"]
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.cuda.init()
    result = {"ok": True, "witnessed": False, "reason": None, "rounds": 0, "calls_per_round": 0,
              "outputs_checked": 0, "mismatch": None, "runner_error": None, "reference_error": None,
              "candidate_ms": None,
              "reference_ms": None, "candidate_min_ms": None, "reference_min_ms": None, "ref_runtime_ms": None,
              "ref_runtime_stats": {}, "ref_call_min_ms": None, "estimate_ms": None,
              "device": str(device), "precision": req["precision"], "tolerance": TOLERANCES[req["precision"]]}
    # Both sources are read once, here, before any runner exists; the runners get them in a frame.
    loaded = load_problem(req["problem_path"])
    with open(req["candidate_path"], "r", encoding="utf-8", errors="replace") as f:
        candidate_source = f.read()
    get_inputs = loaded[4]
    lock = req["lock"]
    runners = {}
    try:
        model, _ = build_reference(req, loaded)
        lock.enter("shared")
        with torch.no_grad():
            model = model.to(device=device, dtype=req["dtype"])
            first = inputs_for(secrets.randbits(62), get_inputs, req)
            signature = _signature(first)
            out_meta = [(tuple(t.shape), t.dtype) for t in flat_outputs(model(*first))]
            synchronize(device)
            del first
        # The reference timed here by KernelBench's timer, the figure a speedup divides: before any
        # runner exists, so no candidate code can stop this process or load the device meanwhile.
        inputs = inputs_for(req["seed"], get_inputs, req)
        with torch.no_grad(), exclusive_turn(lock):
            t = time_calls(model, lambda i: inputs, req["num_warmup"], req["num_perf_trials"], 1, device, LIVE_CLOCK)
        result["ref_runtime_stats"] = timing_stats(t, device)
        result["ref_runtime_ms"] = result["ref_runtime_stats"]["mean"]

        slot = sum(nbytes(s[1], s[2]) for s in signature if s[0] == "t") + sum(nbytes(*m) for m in out_meta)
        calls = max(1, min(CALLS_PER_ROUND_MAX, SLOT_BUDGET_BYTES[device.type] // max(slot, 1)))
        result["calls_per_round"] = calls
        harness = os.path.abspath(sys.argv[0])
        folder = os.path.dirname(os.path.abspath(req["result_path"]))
        env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
        # One block serves both runners: the reference runner is dead before the candidate runner
        # is given candidate code, so they never use it at the same time.
        rounds = _Rounds(req, signature, out_meta, calls)
        for name in ("reference", "candidate"):  # both start now: Python and torch load meanwhile
            runners[name] = Runner(harness, os.path.join(folder, f"witness-{os.getpid()}-{name}.log"), env, rounds.fd)
        rounds.close_fd()
        for name, runner in runners.items():  # idle before any round is timed
            try:
                runner.expect("up")
            except RunnerFailed as e:
                raise RunnerFailed(f"{name}: {e}")
        times, bound = {}, None
        # The reference runner's rounds all end, and it is killed, before the candidate runner is
        # given any candidate code: nothing the candidate does can touch the reference's figures.
        for name, source in (("reference", None), ("candidate", candidate_source)):
            try:
                times[name], bound = _phase(req, model, get_inputs, signature, runners[name], rounds, result, name,
                                            {"problem_source": loaded[0], "candidate_source": source, **rounds.setup},
                                            bound)
            except (RunnerFailed, _Mismatch) as e:
                if name == "candidate":
                    raise
                # No candidate code has run yet: not the candidate's failure (a reference that does
                # not reproduce in another process, a device out of memory); the worker ends the job
                # CRASH rather than take the candidate's own figures unwitnessed.
                raise _ReferenceFailed(str(e))
        result["rounds"] = req["witness_rounds"]
        result["candidate_ms"], result["reference_ms"] = median(times["candidate"]), median(times["reference"])
        result["candidate_min_ms"], result["reference_min_ms"] = min(times["candidate"]), min(times["reference"])
        # Both runners pay the same hand-over (the same buffers, pipe and synchronisation): the
        # candidate's best witnessed round less the reference's, plus the reference's own best time
        # (by KernelBench's timer before the runners, or of the calls this process made in the
        # rounds, whichever is less: a loaded host only adds time), estimates the candidate's time
        # without trusting its process.
        result["estimate_ms"] = max(0.0, result["candidate_min_ms"] - result["reference_min_ms"]
                                    + min(result["ref_runtime_stats"]["min"], result["ref_call_min_ms"]))
        result["witnessed"] = True
    except Unsupported as e:
        result["reason"] = str(e)
    except _Mismatch as e:
        result["mismatch"] = str(e)
    except RunnerFailed as e:
        result["runner_error"] = str(e)
    except _ReferenceFailed as e:
        result["reference_error"] = str(e)
    finally:
        for runner in runners.values():
            runner.close()
    return sign(result, key)


class _Mismatch(Exception):
    pass


class _ReferenceFailed(Exception):
    pass


# A timed round that takes longer than this many times the reference runner's last warm-up round,
# or than ROUND_FLOOR_S, whichever is longer, ends the witness: the runner holds the device's
# exclusive turn meanwhile, and every other job on the device waits. The bound comes from the
# reference runner's rounds, which no candidate code touches (a candidate slow in its own warm-up
# would buy itself a longer one). Warm-up rounds (a first call may compile for minutes) are bounded
# only by the job's deadline.
ROUND_SLOWDOWN = 20
ROUND_FLOOR_S = 10.0


def _phase(req, model, get_inputs, signature, runner, rounds, result, name, setup, limit_s):
    """One runner's setup, its warm-up rounds and its timed rounds (each bounded by limit_s, or for
    the reference runner by its own last warm-up round); returns (the milliseconds a call of each
    timed round took, the bound its timed rounds had). The runner is closed at the end."""
    device = req["device_obj"]
    try:
        runner.send({"backend": req["backend"], "device": str(device), "precision": req["precision"],
                     "seed": req["seed"], "switches": req["switches"], "build_dir": req["build_dir"], **setup})
        runner.expect("ready")
        times, bound = [], None
        for r in range(WARMUP_ROUNDS + req["witness_rounds"]):
            elapsed = _round(req, model, get_inputs, signature, runner, rounds, result, name, r, bound)
            if r == WARMUP_ROUNDS - 1:
                bound = limit_s if limit_s is not None else max(ROUND_FLOOR_S, ROUND_SLOWDOWN * elapsed / 1e3)
            if r >= WARMUP_ROUNDS:
                times.append(elapsed / len(rounds.slots))
    except RunnerFailed as e:
        raise RunnerFailed(f"{name}: {e}")
    finally:
        runner.close()
    return times, bound


def _round(req, model, get_inputs, signature, runner, rounds, result, name, r, limit_s):
    """One round: fresh secret inputs and forward seeds, staged in the block's layout; the reference
    computed here; the outputs poisoned. Then, on the clock: the inputs copied into the block (no
    runner sees them before the clock starts), "run", "done", and the outputs copied out (an answer
    given before the work ended gains nothing). Then every output checked. Returns the elapsed
    milliseconds."""
    device, lock = req["device_obj"], req["lock"]
    refs, seeds = [], []
    with torch.no_grad():
        for staged, (_, outs) in zip(rounds.staged, rounds.slots):
            fresh = inputs_for(secrets.randbits(62), get_inputs, req)
            if _signature(fresh) != signature:
                raise Unsupported("get_inputs() gives inputs of other shapes, types or values from one seed to another")
            seeds.append(secrets.randbits(62))
            for buf, x in zip(staged, fresh):  # staged before the reference, which may change its inputs
                if buf is not None:
                    buf.copy_(x)
            synchronize(device)
            set_seed(seeds[-1])
            t_ref = time.perf_counter()
            out = model(*fresh)
            synchronize(device)
            # The same work as the round's, timed here in the same moments of the host's load.
            call_ms = (time.perf_counter() - t_ref) * 1e3
            if result["ref_call_min_ms"] is None or call_ms < result["ref_call_min_ms"]:
                result["ref_call_min_ms"] = call_ms
            refs.append([t.clone() for t in flat_outputs(out)])
            for o in outs:
                _poison(o)
        order = frame({"run": seeds})
        synchronize(device)
        with exclusive_turn(lock):
            runner.quiet()
            t0 = time.perf_counter()
            rounds.block[: rounds.inputs_end].copy_(rounds.staging[: rounds.inputs_end])
            synchronize(device)
            runner.send_bytes(order)
            got = runner.answer(limit_s)
            rounds.snapshot.copy_(rounds.block[rounds.inputs_end:])
            synchronize(device)
            elapsed = (time.perf_counter() - t0) * 1e3
        if got != "done":
            raise RunnerFailed(f"the runner answered {got[:200]!r} where 'done' was due")
        for i, (ref, cand) in enumerate(zip(refs, rounds.copied_out)):
            for j, (a, b) in enumerate(zip(ref, cand)):
                if not _matches(a, b, TOLERANCES[req["precision"]]):
                    diff = (a.to(torch.complex128 if a.is_complex() else torch.float64)
                            - b.to(torch.complex128 if b.is_complex() else torch.float64)).abs()
                    raise _Mismatch(f"{name}: round {r} call {i} output {j} differs from the reference on inputs "
                                    f"it had not seen (max difference {float(diff.nan_to_num(float('inf')).max()):.6g})")
                result["outputs_checked"] += 1
    return elapsed


def sign(result, key):
    body = json.dumps(result, sort_keys=True, allow_nan=False, default=str)
    mac = hmac.new(bytes.fromhex(key), body.encode(), hashlib.sha256).hexdigest() if key else None
    return {"body": body, "mac": mac}


