"""The request: its keys, types and defaults, and the checks that make a bad one exit 2 (HARNESS.md,
"Request")."""

import json
import os
import re

import torch


HARNESS_VERSION = 1

MODES = ("reference", "candidate", "judge", "baseline", "witness")
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
    "witness_rounds": (int, 10),  # witness: timed rounds per runner
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
                     ("rotations", 0), ("rotation_perf_trials", 1), ("witness_rounds", 1)):
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
    if mode in ("candidate", "witness"):
        if not req["candidate_path"]:
            raise BadRequest(f'{mode} mode needs "candidate_path"')
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
