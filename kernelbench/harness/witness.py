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
from .runner import ANSWER_MAX_BYTES, Unsupported, flat_outputs, frame, make_buffer, nbytes, view
from .timing import LIVE_CLOCK, median, synchronize, time_calls, timing_stats

KEY_ENV = "AK_WITNESS_KEY"
WARMUP_ROUNDS = 2
CALLS_PER_ROUND_MAX = 8
SLOT_BUDGET_BYTES = {"cuda": 512 << 20, "cpu": 32 << 20}


class RunnerFailed(Exception):
    """The runner died, answered something other than the protocol, or said it failed."""


class Runner:
    """One runner process, as the witness sees it: frames go down its stdin, and its answers are read
    from its stdout one byte at a time, unbuffered, so that nothing it wrote ahead hides in a buffer."""

    def __init__(self, harness, log_path, env):
        self.log = open(log_path, "ab")
        # Its own process stays in the step's process group and dies with it; it dies with the
        # witness too (PR_SET_PDEATHSIG, set by the runner).
        self.proc = subprocess.Popen([sys.executable, harness, "--witness-runner"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, close_fds=True, env=env, bufsize=0)
        self.out = self.proc.stdout.fileno()

    def send(self, obj):
        try:
            data = frame(obj)
            while data:
                data = data[os.write(self.proc.stdin.fileno(), data):]
        except OSError as e:
            raise RunnerFailed(f"the runner is gone ({e})")

    def answer(self):
        line = bytearray()
        while len(line) < ANSWER_MAX_BYTES:
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
        self.proc.kill()
        self.proc.wait()
        self.log.close()


# ---------------------------------------------------------------------------------------------
# The witness
# ---------------------------------------------------------------------------------------------


def _not_dumpable():
    """No process of this uid may ptrace this one or read its memory, environment or descriptors."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def _signature(inputs):
    return [("t", tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else ("v", x) for x in inputs]


ALIGN = 256


class _Rounds:
    """The buffers of one runner, in one shared block: `calls` slots of inputs and outputs."""

    def __init__(self, req, name, signature, out_meta, calls):
        folder = os.path.dirname(os.path.abspath(req["result_path"]))
        layout, offset = [], 0

        def place(shape, dtype):
            nonlocal offset
            at = offset
            offset += -(-nbytes(shape, dtype) // ALIGN) * ALIGN
            return at

        for _ in range(calls):
            ins = [("v", sig[1]) if sig[0] == "v" else ("t", place(sig[1], sig[2]), sig[1], sig[2]) for sig in signature]
            outs = [(place(shape, dtype), shape, dtype) for shape, dtype in out_meta]
            layout.append({"inputs": ins, "outputs": outs})
        self.block, desc = make_buffer(req["device_obj"], offset, folder, f"witness-{os.getpid()}-{name}.buffers")
        self.slots = [([None if d[0] == "v" else view(self.block, *d[1:]) for d in s["inputs"]],
                       [view(self.block, *d) for d in s["outputs"]]) for s in layout]
        self.setup = {"block": desc, "slots": layout}
        self.path = desc.get("path")


def _poison(t):
    if t.is_floating_point():
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(torch.iinfo(t.dtype).max)


def _matches(ref, got, tol):
    if ref.is_floating_point():
        # A reference value below the dtype's smallest normal may come back as zero (flush-to-zero).
        ref = torch.where(ref.abs() < torch.finfo(ref.dtype).tiny, torch.zeros_like(ref), ref)
        return bool(torch.allclose(ref.float(), got.float(), atol=tol, rtol=tol))
    return bool(torch.equal(ref, got))


def run_witness(req):
    _not_dumpable()
    key = os.environ.pop(KEY_ENV, "")
    device = req["device_obj"]
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.cuda.init()
    result = {"ok": True, "witnessed": False, "reason": None, "rounds": 0, "calls_per_round": 0,
              "outputs_checked": 0, "mismatch": None, "runner_error": None, "candidate_ms": None,
              "reference_ms": None, "candidate_min_ms": None, "reference_min_ms": None, "ref_runtime_ms": None,
              "ref_runtime_stats": {}, "estimate_ms": None,
              "device": str(device), "precision": req["precision"], "tolerance": TOLERANCES[req["precision"]]}
    loaded = load_problem(req["problem_path"])
    get_inputs = loaded[4]
    lock = req["lock"]
    runners, plans = [], []
    try:
        model, _ = build_reference(req, loaded)
        lock.enter("shared")
        with torch.no_grad():
            model = model.to(device=device, dtype=req["dtype"])
            first = inputs_for(secrets.randbits(62), get_inputs, req)
            signature = _signature(first)
            out_meta = [(tuple(t.shape), t.dtype) for t in flat_outputs(model(*first))]
            synchronize(device)
        slot = sum(nbytes(s[1], s[2]) for s in signature if s[0] == "t") + sum(nbytes(*m) for m in out_meta)
        calls = max(1, min(CALLS_PER_ROUND_MAX, SLOT_BUDGET_BYTES[device.type] // max(slot, 1)))
        result["calls_per_round"] = calls
        harness = os.path.abspath(sys.argv[0])
        folder = os.path.dirname(os.path.abspath(req["result_path"]))
        env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
        for name, candidate in (("candidate", req["candidate_path"]), ("reference", None)):
            rounds = _Rounds(req, name, signature, out_meta, calls)
            runner = Runner(harness, os.path.join(folder, f"witness-{os.getpid()}-{name}.log"), env)
            runners.append(runner)
            runner.send({"problem_path": req["problem_path"], "candidate_path": candidate,
                         "backend": req["backend"], "device": str(device), "precision": req["precision"],
                         "seed": req["seed"], "switches": req["switches"], "build_dir": req["build_dir"],
                         **rounds.setup})
            plans.append((name, runner, rounds))
        for name, runner, rounds in plans:
            try:
                runner.expect("ready")
            except RunnerFailed as e:
                raise RunnerFailed(f"{name}: {e}")
            _unlink(rounds.path)  # both sides have it mapped; the name is no longer needed
        # Rounds alternate between the runners, so that whatever the host does meanwhile falls on both.
        times = {name: [] for name, _, _ in plans}
        for r in range(WARMUP_ROUNDS + req["witness_rounds"]):
            for name, runner, rounds in plans:
                elapsed = _round(req, model, get_inputs, signature, runner, rounds, result, name, r)
                if r >= WARMUP_ROUNDS:
                    times[name].append(elapsed / calls)
        per_call = {name: median(t) for name, t in times.items()}
        result["candidate_min_ms"], result["reference_min_ms"] = min(times["candidate"]), min(times["reference"])
        result["rounds"] = req["witness_rounds"]
        result["candidate_ms"], result["reference_ms"] = per_call["candidate"], per_call["reference"]
        # The reference timed in this process, by KernelBench's timer: the figure a speedup divides.
        inputs = inputs_for(req["seed"], get_inputs, req)
        with torch.no_grad(), exclusive_turn(lock):
            t = time_calls(model, lambda i: inputs, req["num_warmup"], req["num_perf_trials"], 1, device, LIVE_CLOCK)
        result["ref_runtime_stats"] = timing_stats(t, device)
        result["ref_runtime_ms"] = result["ref_runtime_stats"]["mean"]
        # Both runners pay the same hand-over (the same buffers, pipe and synchronisation), so the
        # difference of their witnessed times is the difference of their work.
        result["estimate_ms"] = max(0.0, per_call["candidate"] - per_call["reference"] + result["ref_runtime_ms"])
        result["witnessed"] = True
    except Unsupported as e:
        result["reason"] = str(e)
    except _Mismatch as e:
        result["mismatch"] = str(e)
    except RunnerFailed as e:
        result["runner_error"] = str(e)
    finally:
        for runner in runners:
            runner.close()
        for _, _, rounds in plans:
            _unlink(rounds.path)
    return sign(result, key)


def _unlink(path):
    if path:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


class _Mismatch(Exception):
    pass


def _round(req, model, get_inputs, signature, runner, rounds, result, name, r):
    """One round: fresh secret inputs, the reference computed here, the outputs poisoned; then, on
    the clock, the inputs copied into the slots (no runner sees them before the clock starts), "run",
    "done"; then every output it wrote checked. Returns the elapsed milliseconds."""
    device, lock = req["device_obj"], req["lock"]
    refs, fresh_sets = [], []
    with torch.no_grad():
        for _, outs in rounds.slots:
            fresh = inputs_for(secrets.randbits(62), get_inputs, req)
            if _signature(fresh) != signature:
                raise Unsupported("get_inputs() gives inputs of other shapes, types or values from one seed to another")
            refs.append([t.clone() for t in flat_outputs(model(*[x.clone() if isinstance(x, torch.Tensor) else x
                                                                    for x in fresh]))])
            fresh_sets.append(fresh)
            for o in outs:
                _poison(o)
        synchronize(device)
        with exclusive_turn(lock):
            runner.quiet()
            t0 = time.perf_counter()
            for (ins, _), fresh in zip(rounds.slots, fresh_sets):
                for buf, x in zip(ins, fresh):
                    if buf is not None:
                        buf.copy_(x)
            synchronize(device)
            runner.send("run")
            got = runner.answer()
            elapsed = (time.perf_counter() - t0) * 1e3
            snapshot = [[o.clone() for o in outs] for _, outs in rounds.slots]
            synchronize(device)
        if got != "done":
            raise RunnerFailed(f"{name} runner answered {got[:200]!r} where 'done' was due")
        for i, (ref, cand) in enumerate(zip(refs, snapshot)):
            for j, (a, b) in enumerate(zip(ref, cand)):
                if not _matches(a, b, TOLERANCES[req["precision"]]):
                    diff = (a.float() - b.float()).abs()
                    raise _Mismatch(f"{name}: round {r} call {i} output {j} differs from the reference on inputs "
                                    f"it had not seen (max difference {float(diff.nan_to_num(float('inf')).max()):.6g})")
                result["outputs_checked"] += 1
    return elapsed


def sign(result, key):
    body = json.dumps(result, sort_keys=True, allow_nan=False, default=str)
    mac = hmac.new(bytes.fromhex(key), body.encode(), hashlib.sha256).hexdigest() if key else None
    return {"body": body, "mac": mac}


