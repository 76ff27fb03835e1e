"""One step as a whole process: read the request, run its mode, write the result (HARNESS.md,
"Protocol")."""

import os
import sys
import traceback

import torch

from .candidate import run_candidate
from .compare import write_json_atomic
from .gpu_lock import GpuLock
from .modes import run_baseline, run_judge, run_reference
from .request import HARNESS_VERSION, BadRequest, ProblemError, load_request
from .runner import run_runner
from .witness import run_witness


MODE_FUNCTIONS = {"reference": run_reference, "candidate": run_candidate, "judge": run_judge, "baseline": run_baseline,
                  "witness": run_witness}


def main(argv):
    if len(argv) != 2:
        print("usage: python kernelbench/harness REQUEST_JSON_PATH | --serve (see kernelbench/HARNESS.md)", file=sys.stderr)
        return 2
    try:
        req = load_request(argv[1])
    except BadRequest as e:
        print(f"harness: bad request: {e}", file=sys.stderr)
        return 2
    req["lock"] = GpuLock(req["gpu_lock"]) if req["mode"] != "judge" else GpuLock(None)
    try:
        result = MODE_FUNCTIONS[req["mode"]](req)
    except ProblemError as e:
        print(f"harness: bad request: {e}", file=sys.stderr)
        return 2
    result = dict(result, mode=req["mode"], harness_version=HARNESS_VERSION, torch_version=torch.__version__)
    lock = req["lock"]
    if lock.active:
        lock.enter(None)  # the turn ends here (a candidate's threads may run on until the exit)
        result["gpu_lock"] = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in lock.stats.items()}
    write_json_atomic(req["result_path"], result)
    return 0


def exit_code(fn, *args):
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


def run(argv):
    """The process: `harness REQUEST_JSON_PATH` runs one step, `harness --serve` the fork server.
    Never returns."""
    if argv[1:] == ["--serve"]:
        from .serve import serve
        os._exit(exit_code(serve))
    if argv[1:] == ["--witness-runner"]:
        os._exit(exit_code(run_runner))
    os._exit(exit_code(main, argv))
