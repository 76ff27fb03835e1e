#!/usr/bin/env python3
"""Tests of kernelbench/harness/, run the way the worker runs it: one subprocess per request.

Everything runs on the CPU (device "cpu", precision fp32, backend "torch", 2 correctness trials,
5 perf trials); the GPU-only parts (side-stream check, CUDA-event timing, Triton, load_inline)
run with --gpu alone, and exit 77 (a skip) without CUDA. The harness runs are independent
processes, so they are started two at a time up front (setUpModule) and each test waits for the
ones it reads; a test run alone starts its own. Registered in ctest as kernelbench_harness (label
unit) and kernelbench_harness_gpu (--gpu, label gpu) in tests/kernelbench/CMakeLists.txt.

Timing assertions only use ratios that are orders of magnitude away from their thresholds, so a
loaded machine cannot flip them (see each test).
"""

import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HARNESS = os.path.join(ROOT, "kernelbench", "harness")  # run as a folder, as its zipapp runs
sys.path.insert(0, os.path.dirname(HARNESS))  # the package's modules, for the tests that call them
from harness import candidate as _candidate_module  # noqa: E402,F401 - every module imports
from harness import compare, gpu_lock, problem as problem_module, strict  # noqa: E402
PROBLEMS = os.path.join(ROOT, "tests", "kernelbench", "problems")
CANDIDATES = os.path.join(ROOT, "tests", "kernelbench", "candidates")
PYTHON = sys.executable

# One intra-op thread: on a shared 2-core machine two OpenMP threads turn a 0.4 ms matmul into
# 25 ms whenever the other core is busy, which makes every CPU timing noise.
ENV = dict(os.environ, OMP_NUM_THREADS="1")

BASE_REQUEST = {"backend": "torch", "device": "cpu", "precision": "fp32", "seed": 42,
                "num_correct_trials": 2, "num_perf_trials": 5}
TRIALS, ROTATIONS = 2, 4
RUN_TIMEOUT_S = 300
HANG_TIMEOUT_S = 20  # the matmul problem loads in ~4 s even on a loaded machine

WORKDIR = tempfile.mkdtemp(prefix="kb_harness_test_")


def problem(name):
    return os.path.join(PROBLEMS, name)


def candidate(name):
    return os.path.join(CANDIDATES, name)


class Run:
    def __init__(self, returncode, result, stderr, seconds, timed_out=False, result_path=None):
        self.returncode, self.result, self.stderr = returncode, result, stderr
        self.seconds, self.timed_out, self.result_path = seconds, timed_out, result_path


_counter = [0]
_counter_lock = threading.Lock()


def run_harness(request, timeout=RUN_TIMEOUT_S, env=None):
    with _counter_lock:
        _counter[0] += 1
        n = _counter[0]
    request = dict(request)
    request.setdefault("result_path", os.path.join(WORKDIR, f"{n}.result.json"))
    request_path = os.path.join(WORKDIR, f"{n}.request.json")
    with open(request_path, "w") as f:
        json.dump(request, f)
    start = time.monotonic()
    try:
        proc = subprocess.run([PYTHON, HARNESS, request_path], cwd=ROOT, env=env or ENV, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:  # subprocess.run has killed the child
        stderr = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return Run(None, None, stderr, time.monotonic() - start, timed_out=True, result_path=request["result_path"])
    result = None
    if os.path.exists(request["result_path"]):
        with open(request["result_path"]) as f:
            result = json.load(f)
    return Run(proc.returncode, result, proc.stderr, time.monotonic() - start, result_path=request["result_path"])


def checked(run, what):
    """The result of a run that must have written a verdict."""
    if run.returncode != 0 or run.result is None:
        raise AssertionError(f"{what}: harness exited {run.returncode} without a result; stderr:\n{run.stderr[-3000:]}")
    return run.result


# --- the evaluations, computed once and shared by the tests ----------------------------------

_references = {}
_references_lock = threading.Lock()


def reference(problem_name, switches=None, device="cpu"):
    """Reference outputs of a problem (memoised per problem, switches and device)."""
    key = (problem_name, json.dumps(switches, sort_keys=True), device)
    with _references_lock:
        entry = _references.setdefault(key, {"lock": threading.Lock(), "value": None})
    with entry["lock"]:
        if entry["value"] is None:
            path = os.path.join(WORKDIR, f"ref_{len(_references)}_{problem_name.replace('/', '_')}.pt")
            req = dict(BASE_REQUEST, mode="reference", problem_path=problem(problem_name), reference_outputs=path,
                       device=device)
            if switches:
                req["switches"] = switches
            entry["value"] = (run_harness(req), path)
        return entry["value"]


def evaluate(problem_name, candidate_name, switches=None, judge=False, **extra):
    """candidate mode (strict), then, with judge, reference and judge in their own processes."""
    out_path = os.path.join(WORKDIR, f"cand_{candidate_name}_{abs(hash((problem_name, str(switches), str(extra))))}.pt")
    req = dict(BASE_REQUEST, mode="candidate", problem_path=problem(problem_name),
               candidate_path=candidate(candidate_name), candidate_outputs=out_path, **extra)
    if switches:
        req["switches"] = switches
    runs = {"candidate": run_harness(req), "candidate_outputs": out_path}
    if judge:
        ref_run, ref_path = reference(problem_name, switches, req["device"])
        runs["reference"] = ref_run
        jreq = dict(mode="judge", precision="fp32", reference_outputs=ref_path, candidate_outputs=out_path)
        if switches:
            jreq["switches"] = switches
        runs["judge"] = run_harness(jreq)
    return runs


def locked_pair(problem_name, candidate_name=None):
    """Two eager baselines (or two evaluations of a candidate) started at once, sharing one GPU
    lock file (HARNESS.md, "Sharing a GPU")."""
    lock = os.path.join(WORKDIR, f"gpu0_{candidate_name or 'baseline'}.lock")
    req = dict(BASE_REQUEST, mode="baseline", problem_path=problem(problem_name), gpu_lock=lock, num_perf_trials=20)
    if candidate_name:
        req.update(mode="candidate", candidate_path=candidate(candidate_name))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return [f.result() for f in [pool.submit(run_harness, req) for _ in range(2)]]


WITNESS_KEY = "5a" * 32


def witness(problem_name, candidate_name, key=WITNESS_KEY, **extra):
    """The candidate step (its faithful figures), then witness mode on the same candidate, with the
    worker's key in the environment (HARNESS.md, "witness")."""
    runs = evaluate(problem_name, candidate_name, **extra)
    req = dict(BASE_REQUEST, mode="witness", problem_path=problem(problem_name),
               candidate_path=candidate(candidate_name), witness_rounds=5, **extra)
    env = dict(ENV, AK_WITNESS_KEY=key) if key else ENV
    runs["witness"] = run_harness(req, env=env)
    return runs


L1 = "level1/"
CASES = {
    # name: (function, args, kwargs)
    "matmul_correct": (evaluate, (L1 + "1_Matmul.py", "matmul_correct.py"), {"judge": True}),
    "linear_correct": (evaluate, (L1 + "2_Linear.py", "linear_correct.py"), {}),
    "conv_relu_bias_correct": (evaluate, ("level2/1_Conv2d_ReLU_BiasAdd.py", "conv2d_relu_bias_correct.py"), {}),
    "topk_correct": (evaluate, (L1 + "4_TopK.py", "topk_correct.py"), {"judge": True}),
    "topk_no_tuple_switch": (evaluate, (L1 + "4_TopK.py", "topk_correct.py"),
                             {"switches": {"compare_tuple_outputs": False}, "judge": True}),
    "cross_entropy_correct": (evaluate, (L1 + "5_CrossEntropyLoss.py", "cross_entropy_correct.py"), {"judge": True}),
    "cross_entropy_cast": (evaluate, (L1 + "5_CrossEntropyLoss.py", "cross_entropy_correct.py"),
                           {"switches": {"keep_integer_inputs": False}}),
    "masked_fill_correct": (evaluate, (L1 + "6_MaskedFill.py", "masked_fill_correct.py"), {"judge": True}),
    "masked_fill_cast": (evaluate, (L1 + "6_MaskedFill.py", "masked_fill_correct.py"),
                         {"switches": {"keep_integer_inputs": False}}),
    "scale_shift_correct": (evaluate, (L1 + "7_ScaleShift.py", "scale_shift_correct.py"), {}),
    "sum_correct": (evaluate, (L1 + "8_Sum_reduction_over_a_dimension.py", "sum_correct.py"), {}),
    "softmax_correct": (evaluate, (L1 + "9_Softmax.py", "softmax_correct.py"), {"judge": True}),
    "softmax_wrong": (evaluate, (L1 + "9_Softmax.py", "softmax_wrong.py"), {"judge": True}),
    "softmax_shape_mismatch": (evaluate, (L1 + "9_Softmax.py", "softmax_shape_mismatch.py"), {}),
    "chunk_correct": (evaluate, (L1 + "10_Chunk.py", "chunk_correct.py"), {"judge": True}),
    # 10 perf trials: one preemption of the fast candidate must not pull the speedup under 10x.
    "cumsum_fast": (evaluate, (L1 + "11_CumsumLoop.py", "cumsum_fast.py"), {"num_perf_trials": 10}),
    "mlp_correct": (evaluate, ("level3/1_MLP.py", "mlp_correct.py"), {}),
    "raises_in_forward": (evaluate, (L1 + "1_Matmul.py", "raises_in_forward.py"), {}),
    "syntax_error": (evaluate, (L1 + "1_Matmul.py", "syntax_error.py"), {}),
    "no_modelnew": (evaluate, (L1 + "1_Matmul.py", "no_modelnew.py"), {}),
    "construct_raises": (evaluate, (L1 + "1_Matmul.py", "construct_raises.py"), {}),
    "exits_at_import": (evaluate, (L1 + "1_Matmul.py", "exits_at_import.py"), {}),
    "monkeypatch_reference": (evaluate, (L1 + "1_Matmul.py", "monkeypatch_reference.py"), {"judge": True}),
    "mutates_inputs": (evaluate, (L1 + "7_ScaleShift.py", "mutates_inputs.py"), {"judge": True}),
    "uninitialised_output": (evaluate, (L1 + "12_Tril.py", "uninitialised_output.py"), {}),
    "cache_by_identity": (evaluate, (L1 + "1_Matmul.py", "cache_by_identity.py"), {"judge": True}),
    "static_flagged": (evaluate, (L1 + "9_Softmax.py", "static_flagged.py"), {}),
    "witness_matmul_correct": (witness, (L1 + "1_Matmul.py", "matmul_correct.py"), {}),
    "witness_topk_unsigned": (witness, (L1 + "4_TopK.py", "topk_correct.py"), {"key": None}),
    "witness_forges_its_clock": (witness, (L1 + "1_Matmul.py", "forges_its_clock.py"), {}),
    "witness_knows_the_seeds": (witness, (L1 + "1_Matmul.py", "knows_the_seeds.py"), {}),
    "witness_exits_at_import": (witness, (L1 + "1_Matmul.py", "exits_at_import.py"), {}),
    "witness_answers_ahead": (witness, (L1 + "1_Matmul.py", "answers_ahead.py"), {}),
    "witness_hangs_when_witnessed": (witness, (L1 + "1_Matmul.py", "hangs_when_witnessed.py"), {}),
    "matmul_cuda_backend": (evaluate, (L1 + "1_Matmul.py", "matmul_correct.py"),
                            {"backend": "cuda", "build_dir": os.path.join(WORKDIR, "build")}),
    "hangs": (run_harness, (dict(BASE_REQUEST, mode="candidate", problem_path=problem(L1 + "1_Matmul.py"),
                                 candidate_path=candidate("hangs.py")),), {"timeout": HANG_TIMEOUT_S}),
    "baseline_eager": (run_harness, (dict(BASE_REQUEST, mode="baseline", problem_path=problem(L1 + "2_Linear.py")),), {}),
    "baseline_locked_pair": (locked_pair, (L1 + "2_Linear.py",), {}),
    "candidate_locked_pair": (locked_pair, (L1 + "9_Softmax.py", "softmax_correct.py"), {}),
    # With a lock: the first call compiles with no turn held (compile_off_turn).
    "baseline_compile": (run_harness, (dict(BASE_REQUEST, mode="baseline", problem_path=problem(L1 + "2_Linear.py"),
                                            compile=True, compile_mode="default",
                                            gpu_lock=os.path.join(WORKDIR, "gpu0_compile.lock")),), {}),
}
CUDA = torch.cuda.is_available()
# The GPU halves run as their own ctest, kernelbench_harness_gpu (label gpu): `harness_test.py
# --gpu` runs CudaTest alone and exits 77 (ctest's skip) without a device; the CPU run
# (kernelbench_harness, label unit) leaves them out.
GPU_RUN = "--gpu" in sys.argv[1:]
if GPU_RUN:
    CASES = {}
if GPU_RUN and CUDA:
    CASES.update({
        "cuda_matmul_correct": (evaluate, (L1 + "1_Matmul.py", "matmul_correct.py"), {"device": "cuda:0", "judge": True}),
        "cuda_side_stream": (evaluate, (L1 + "1_Matmul.py", "side_stream.py"), {"device": "cuda:0", "judge": True}),
        "cuda_uninitialised_output": (evaluate, (L1 + "12_Tril.py", "uninitialised_output.py"), {"device": "cuda:0"}),
        "cuda_triton_candidate": (evaluate, (L1 + "7_ScaleShift.py", "scale_shift_triton.py"),
                                  {"device": "cuda:0", "backend": "triton"}),
        "cuda_load_inline_candidate": (evaluate, (L1 + "7_ScaleShift.py", "scale_shift_cuda.py"),
                                       {"device": "cuda:0", "backend": "cuda",
                                        "build_dir": os.path.join(WORKDIR, "cuda_build")}),
        "cuda_witness_matmul": (witness, (L1 + "1_Matmul.py", "matmul_correct.py"), {"device": "cuda:0"}),
        "cuda_witness_triton": (witness, (L1 + "7_ScaleShift.py", "scale_shift_triton.py"),
                                {"device": "cuda:0", "backend": "triton"}),
        "cuda_witness_forges_its_clock": (witness, (L1 + "1_Matmul.py", "forges_its_clock.py"), {"device": "cuda:0"}),
        "cuda_witness_knows_the_seeds": (witness, (L1 + "1_Matmul.py", "knows_the_seeds.py"), {"device": "cuda:0"}),
    })
# Which problem each candidate case ran on, for the table.
_CASE_PROBLEM = {name: args[0] for name, (fn, args, _) in CASES.items() if fn is evaluate}

_pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
_futures = {}
_futures_lock = threading.Lock()


def start(name):
    with _futures_lock:
        if name not in _futures:
            fn, args, kwargs = CASES[name]
            _futures[name] = _pool.submit(fn, *args, **kwargs)
        return _futures[name]


def case(name):
    return start(name).result()


def verdict(name):
    return checked(case(name)["candidate"], name)


_T0 = time.monotonic()


def setUpModule():
    # The slowest first, so two workers stay busy to the end.
    for name in sorted(CASES, key=lambda n: n not in ("baseline_compile", "hangs")):
        start(name)


def tearDownModule():
    _pool.shutdown(wait=True)
    shutil.rmtree(WORKDIR, ignore_errors=True)


# --- witness mode: timed and checked from outside the candidate's process ------------------------


def witnessed(name):
    """(the witness's result, its signature) of a witness case, checked as the worker checks it."""
    run = case(name)["witness"]
    doc = checked(run, name + " witness")
    return json.loads(doc["body"]), doc["mac"]


class WitnessTest(unittest.TestCase):
    def test_an_honest_candidate_is_witnessed_and_every_output_it_timed_checked(self):
        w, mac = witnessed("witness_matmul_correct")
        self.assertTrue(w["witnessed"], w)
        self.assertIsNone(w["mismatch"])
        self.assertIsNone(w["runner_error"])
        # 2 warm-up rounds and 5 timed ones, for the candidate and for the reference runner.
        self.assertEqual(w["outputs_checked"], 2 * (2 + 5) * w["calls_per_round"])
        self.assertGreater(w["candidate_ms"], 0)
        self.assertGreater(w["ref_runtime_ms"], 0)
        self.assertEqual(w["ref_runtime_stats"]["num_trials"], BASE_REQUEST["num_perf_trials"])

    def test_the_result_is_signed_with_the_workers_key_and_unsigned_without_one(self):
        import hashlib
        import hmac
        doc = checked(case("witness_matmul_correct")["witness"], "witness")
        want = hmac.new(bytes.fromhex(WITNESS_KEY), doc["body"].encode(), hashlib.sha256).hexdigest()
        self.assertEqual(doc["mac"], want)
        w, mac = witnessed("witness_topk_unsigned")
        self.assertIsNone(mac)
        # A tuple of two tensors (values, indices) goes through the buffers too.
        self.assertTrue(w["witnessed"], w)
        self.assertIsNone(w["mismatch"])

    def test_a_clock_the_candidate_rewrote_fools_its_own_timing_but_not_the_witness(self):
        r = verdict("witness_forges_its_clock")
        self.assertEqual(r["verdict"], "correct")
        w, _ = witnessed("witness_forges_its_clock")
        self.assertTrue(w["witnessed"], w)
        # It sleeps 20 ms a call and reports a thousandth of that: the witness's estimate is
        # hundreds of times the candidate's own figure, far beyond any host's noise.
        self.assertLess(r["runtime_ms"], 0.5)
        self.assertGreater(w["estimate_ms"], 15.0)
        self.assertGreater(w["estimate_ms"], 30 * r["runtime_ms"])

    def test_a_candidate_that_knows_the_published_seeds_passes_everything_but_the_witness(self):
        r = verdict("witness_knows_the_seeds")
        self.assertEqual(r["verdict"], "correct", r["metadata"])
        self.assertFalse(r["strict"]["rotation_suspect"])
        w, _ = witnessed("witness_knows_the_seeds")
        self.assertFalse(w["witnessed"])
        self.assertIn("candidate: round 0 call 0 output 0 differs from the reference on inputs it had not seen",
                      w["mismatch"])

    def test_answers_written_ahead_of_their_order_do_not_stop_the_clock_early(self):
        self.assertEqual(verdict("witness_answers_ahead")["verdict"], "correct")
        w, _ = witnessed("witness_answers_ahead")
        self.assertFalse(w["witnessed"], w)
        # The first "done" it wrote in the warm-up round is read as that round's answer: its outputs
        # are not all written yet (NaN-poisoned), or the next round finds answers waiting.
        why = w["mismatch"] or w["runner_error"] or ""
        self.assertTrue("differs from the reference" in why or "answered before it was asked" in why, w)

    def test_a_reference_that_differs_from_process_to_process_is_the_references_failure_not_the_candidates(self):
        # Its output depends on the process it runs in: the reference runner's outputs differ from the
        # witness's own before any candidate code exists (reference_error, which the worker ends
        # CRASH; it used to fail the candidate, as "reference: ... differs").
        src = ("import os\nimport torch\nimport torch.nn as nn\n\n\n"
               "class Model(nn.Module):\n    def forward(self, x):\n        return x + float(os.getpid() % 1000)\n\n\n"
               "def get_inputs():\n    return [torch.randn(8, 8)]\n\n\ndef get_init_inputs():\n    return []\n")
        prob = os.path.join(WORKDIR, "per_process_reference.py")
        cand = os.path.join(WORKDIR, "per_process_candidate.py")
        with open(prob, "w") as f:
            f.write(src)
        with open(cand, "w") as f:
            f.write(src.replace("class Model(", "class ModelNew("))
        w = json.loads(checked(witness(prob, cand)["witness"], "per-process witness")["body"])
        self.assertFalse(w["witnessed"], w)
        self.assertIsNone(w["mismatch"])
        self.assertIsNone(w["runner_error"])
        self.assertIsNone(w["reason"])
        self.assertIn("reference: round 0 call 0 output 0 differs", w["reference_error"])

    def test_a_runner_that_stops_answering_in_a_timed_round_fails_after_a_bounded_wait(self):
        self.assertEqual(verdict("witness_hangs_when_witnessed")["verdict"], "correct")
        w, _ = witnessed("witness_hangs_when_witnessed")
        self.assertFalse(w["witnessed"], w)
        # Its warm-up rounds took milliseconds: the floor of 10 s applies, not the job's deadline.
        self.assertIn("candidate: the runner did not answer within 10 s", w["runner_error"] or "", w)

    def test_a_runner_that_dies_is_reported_not_waited_for(self):
        w, _ = witnessed("witness_exits_at_import")
        self.assertFalse(w["witnessed"])
        # It calls sys.exit while loading: the runner says so and the witness stops there.
        self.assertIn("candidate: the runner failed: builtins.SystemExit", w["runner_error"])


# --- the faithful verdicts --------------------------------------------------------------------


class FaithfulVerdictTest(unittest.TestCase):
    def test_correct_candidates_are_correct_and_timed(self):
        for name in ["matmul_correct", "linear_correct", "conv_relu_bias_correct", "scale_shift_correct",
                     "sum_correct", "softmax_correct", "mlp_correct"]:
            with self.subTest(name):
                r = verdict(name)
                self.assertEqual(r["verdict"], "correct", r["metadata"])
                self.assertTrue(r["compiled"])
                self.assertTrue(r["correctness"])
                self.assertEqual(r["metadata"]["correctness_trials"], f"({TRIALS} / {TRIALS})")
                self.assertGreater(r["runtime_ms"], 0)
                self.assertEqual(r["runtime_stats"]["num_trials"], 5)
                self.assertEqual(r["runtime_ms"], r["runtime_stats"]["mean"])
                self.assertGreater(r["ref_runtime_ms"], 0)
                self.assertEqual(r["timer"], "host_perf_counter")
                self.assertEqual(r["switches"], {"keep_integer_inputs": True, "compare_tuple_outputs": True})

    def test_wrong_values_are_incorrect_with_kernelbench_differences_and_no_timing(self):
        r = verdict("softmax_wrong")
        self.assertEqual(r["verdict"], "incorrect")
        self.assertTrue(r["compiled"])
        self.assertEqual(r["metadata"]["correctness_trials"], f"(0 / {TRIALS})")
        self.assertEqual(r["metadata"]["correctness_issue"], "Output mismatch")
        self.assertEqual(len(r["metadata"]["max_difference"]), TRIALS)
        self.assertRegex(r["metadata"]["max_difference"][0], r"^\d+\.\d{6}$")
        self.assertEqual(len(r["metadata"]["avg_difference"]), TRIALS)
        self.assertEqual(r["runtime_ms"], -1)
        # KernelBench times the reference for every candidate that got past construction.
        self.assertGreater(r["ref_runtime_ms"], 0)

    def test_shape_mismatch_stops_at_the_first_trial_with_kernelbench_message(self):
        r = verdict("softmax_shape_mismatch")
        self.assertEqual(r["verdict"], "incorrect")
        self.assertEqual(r["metadata"]["correctness_issue"],
                         "Output shape mismatch: Expected torch.Size([16, 128]), got torch.Size([16, 127])")
        self.assertEqual(r["metadata"]["correctness_issue_name"], "correctness_issue")
        self.assertNotIn("correctness_trials", r["metadata"])

    def test_exception_in_forward_is_a_runtime_error_truncated_to_200_characters(self):
        r = verdict("raises_in_forward")
        self.assertEqual(r["verdict"], "runtime_error")
        self.assertTrue(r["compiled"])
        self.assertFalse(r["correctness"])
        self.assertEqual(r["metadata"]["runtime_error_name"], "builtins.RuntimeError")
        self.assertEqual(len(r["metadata"]["runtime_error"]), 200)
        self.assertTrue(r["metadata"]["runtime_error"].endswith("..."))
        self.assertIn("Traceback", r["metadata"]["runtime_error_traceback"])
        self.assertEqual(r["runtime_ms"], -1)

    def test_syntax_error_is_a_compile_failure(self):
        r = verdict("syntax_error")
        self.assertEqual(r["verdict"], "compile_failure")
        self.assertFalse(r["compiled"])
        self.assertEqual(r["metadata"]["compilation_error_name"], "SyntaxError")
        self.assertEqual(r["runtime_ms"], -1)
        self.assertEqual(r["ref_runtime_ms"], -1)

    def test_missing_modelnew_is_a_compile_failure(self):
        r = verdict("no_modelnew")
        self.assertEqual(r["verdict"], "compile_failure")
        self.assertEqual(r["metadata"]["compilation_error"],
                         "Syntax error in custom generated code or ModelNew not found")

    def test_exception_while_building_modelnew_is_a_runtime_error_after_compiling(self):
        r = verdict("construct_raises")
        self.assertEqual(r["verdict"], "runtime_error")
        self.assertTrue(r["compiled"])
        self.assertEqual(r["metadata"]["runtime_error_name"], "builtins.ValueError")
        self.assertNotIn("correctness_trials", r["metadata"])

    def test_sys_exit_while_loading_still_writes_a_compile_failure(self):
        run = case("exits_at_import")["candidate"]
        self.assertEqual(run.returncode, 0)
        self.assertEqual(run.result["verdict"], "compile_failure")
        self.assertEqual(run.result["metadata"]["compilation_error_name"], "builtins.SystemExit")

    def test_hanging_forward_runs_until_the_callers_timeout_kills_it(self):
        run = case("hangs")
        self.assertTrue(run.timed_out, f"expected the harness to hang; it exited {run.returncode}")
        self.assertFalse(os.path.exists(run.result_path))

    def test_trial_seeds_are_drawn_from_the_seed_as_kernelbench_does(self):
        ref_run, _ = reference(L1 + "1_Matmul.py")
        r = checked(ref_run, "reference")
        torch.manual_seed(42)
        expected = [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(TRIALS)]
        self.assertEqual(r["trial_seeds"], expected)
        self.assertEqual(r["trials"], TRIALS)
        self.assertEqual(r["rotations"], ROTATIONS)

    def test_cuda_backend_loads_by_exec_with_the_build_dir_prefix(self):
        r = verdict("matmul_cuda_backend")
        self.assertEqual(r["verdict"], "correct", r["metadata"])
        self.assertEqual(r["backend"], "cuda")
        # A torch-only candidate has no __global__ kernel: KernelBench's cuda_impl check.
        self.assertIn("cuda_impl", r["strict"]["static_scan"]["errors"])


# --- the GPU halves ---------------------------------------------------------------------------


@unittest.skipUnless(GPU_RUN and CUDA, "the CUDA halves (events, L2 flush, side streams, Triton, load_inline) run "
                                      "with --gpu on a CUDA device (ctest kernelbench_harness_gpu, label gpu)")
class CudaTest(unittest.TestCase):
    def test_cuda_device_times_with_cuda_events_and_passes_every_check(self):
        r = verdict("cuda_matmul_correct")
        self.assertEqual(r["verdict"], "correct", r["metadata"])
        self.assertEqual(r["timer"], "cuda_event")
        self.assertEqual(r["runtime_stats"]["hardware"], torch.cuda.get_device_name(0))
        s = r["strict"]
        self.assertIs(s["side_stream"], False, s["side_stream_detail"])
        self.assertIs(s["output_poison"], False, s["output_poison_detail"])
        self.assertIs(s["rotation_suspect"], False, s["rotated_timing"])
        self.assertEqual(s["monkeypatch"], [])
        self.assertTrue(checked(case("cuda_matmul_correct")["judge"], "judge")["strict_correct"])

    def test_work_left_on_a_side_stream_is_caught(self):
        r = verdict("cuda_side_stream")
        self.assertEqual(r["verdict"], "correct", r["metadata"])  # the device-wide synchronize hides it
        self.assertIn("stream_injection", r["strict"]["static_scan"]["warnings"])
        self.assertTrue(r["strict"]["side_stream"], r["strict"]["side_stream_detail"])
        self.assertTrue(r["strict"]["side_stream_detail"]["escaped_current_stream"])

    def test_uninitialised_output_shows_torchs_nan_fill_on_cuda(self):
        s = verdict("cuda_uninitialised_output")["strict"]
        self.assertTrue(s["output_poison"], s["output_poison_detail"])
        self.assertTrue(s["output_poison_detail"]["nan_fill_values_in_output"])

    def test_triton_candidate_is_imported_from_a_temp_file(self):
        r = verdict("cuda_triton_candidate")
        self.assertEqual(r["verdict"], "correct", r["metadata"])
        self.assertEqual(r["strict"]["static_scan"]["errors"], [])

    def test_load_inline_candidate_builds_in_the_requests_build_dir(self):
        r = verdict("cuda_load_inline_candidate")
        self.assertEqual(r["verdict"], "correct", r["metadata"])
        self.assertEqual(r["strict"]["static_scan"]["errors"], [])
        self.assertTrue(os.path.isdir(os.path.join(WORKDIR, "cuda_build", "scale_shift")))


    def test_the_witness_hands_over_through_cuda_ipc_and_checks_every_output(self):
        for name in ("cuda_witness_matmul", "cuda_witness_triton"):
            w, mac = witnessed(name)
            self.assertTrue(w["witnessed"], (name, w))
            self.assertEqual(w["device"], "cuda:0")
            self.assertEqual(w["outputs_checked"], 2 * (2 + 5) * w["calls_per_round"])
            self.assertEqual(w["ref_runtime_stats"]["hardware"], torch.cuda.get_device_name(0))
            self.assertIsNotNone(mac)
            # An honest candidate passes the worker's timing rule (kernelbench/witness.h): 10 times
            # its own figure plus 0.05 ms is not below the witness's estimate of it.
            own = verdict(name)["runtime_ms"]
            self.assertGreaterEqual(10 * own + 0.05, w["estimate_ms"], (name, own, w))
            print(f"\n{name}: own {own:.4g} ms, witnessed at best: candidate {w['candidate_min_ms']:.4g} ms, "
                  f"reference runner {w['reference_min_ms']:.4g} ms; reference by CUDA events "
                  f"{w['ref_runtime_stats']['min']:.4g} ms at best; estimate {w['estimate_ms']:.4g} ms; "
                  f"{w['calls_per_round']} calls a round", file=sys.stderr)

    def test_the_witness_sees_through_a_rewritten_event_clock_and_published_seeds_on_the_gpu(self):
        r = verdict("cuda_witness_forges_its_clock")
        self.assertEqual(r["timer"], "cuda_event")
        w, _ = witnessed("cuda_witness_forges_its_clock")
        self.assertLess(r["runtime_ms"], 0.5)
        self.assertGreater(w["estimate_ms"], 15.0, w)
        self.assertEqual(verdict("cuda_witness_knows_the_seeds")["verdict"], "correct")
        w, _ = witnessed("cuda_witness_knows_the_seeds")
        self.assertIn("on inputs it had not seen", w["mismatch"] or "", w)


# --- the deviation switches -------------------------------------------------------------------


class SwitchTest(unittest.TestCase):
    def test_integer_targets_stay_int64_by_default(self):
        r = verdict("cross_entropy_correct")
        self.assertEqual(r["verdict"], "correct", r["metadata"])
        self.assertTrue(checked(case("cross_entropy_correct")["judge"], "judge")["strict_correct"])

    def test_kernelbench_cast_of_integer_targets_breaks_the_reference(self):
        r = verdict("cross_entropy_cast")
        self.assertFalse(r["switches"]["keep_integer_inputs"])
        self.assertEqual(r["verdict"], "runtime_error")
        # Raised by the reference's cross_entropy on float targets (KernelBench issue #151).
        self.assertIn("expected scalar type Long but found Float", r["metadata"]["runtime_error"])

    def test_boolean_mask_stays_bool_by_default(self):
        r = verdict("masked_fill_correct")
        self.assertEqual(r["verdict"], "correct", r["metadata"])
        self.assertTrue(checked(case("masked_fill_correct")["judge"], "judge")["strict_correct"])

    def test_kernelbench_cast_of_a_boolean_mask_breaks_the_reference(self):
        r = verdict("masked_fill_cast")
        self.assertEqual(r["verdict"], "runtime_error")
        self.assertIn("only implemented on integer and Boolean", r["metadata"]["runtime_error"])

    def test_tuple_outputs_are_compared_element_by_element_with_the_switch(self):
        r = verdict("topk_correct")
        self.assertEqual(r["verdict"], "correct", r["metadata"])
        j = checked(case("topk_correct")["judge"], "judge")
        self.assertTrue(j["strict_correct"], j["reason"])

    def test_tuple_outputs_are_a_runtime_error_without_the_switch(self):
        r = verdict("topk_no_tuple_switch")
        self.assertEqual(r["verdict"], "runtime_error")
        self.assertIn("'tuple' object has no attribute 'shape'", r["metadata"]["runtime_error"])
        j = checked(case("topk_no_tuple_switch")["judge"], "judge")
        self.assertFalse(j["strict_correct"])
        self.assertIn("compare_tuple_outputs", j["reason"])

    def test_a_list_of_tensors_is_compared_element_by_element(self):
        r = verdict("chunk_correct")
        self.assertEqual(r["verdict"], "correct", r["metadata"])
        j = checked(case("chunk_correct")["judge"], "judge")
        self.assertTrue(j["strict_correct"], j["reason"])


# --- the strict checks ------------------------------------------------------------------------


class StrictCheckTest(unittest.TestCase):
    def test_judge_passes_honest_candidates_on_every_trial_and_rotation(self):
        for name in ["matmul_correct", "softmax_correct", "topk_correct", "chunk_correct"]:
            with self.subTest(name):
                j = checked(case(name)["judge"], f"{name} judge")
                self.assertTrue(j["strict_correct"], j["reason"])
                self.assertEqual((j["trials_passed"], j["trials"]), (TRIALS, TRIALS))
                self.assertEqual((j["rotations_passed"], j["rotations"]), (ROTATIONS, ROTATIONS))
                self.assertTrue(j["inputs_match"])

    def test_judge_fails_a_wrong_candidate(self):
        j = checked(case("softmax_wrong")["judge"], "judge")
        self.assertFalse(j["strict_correct"])
        self.assertEqual(j["trials_passed"], 0)
        self.assertGreater(j["max_difference"], 1e-4)

    def test_reference_monkeypatch_fools_kernelbench_but_not_the_judge(self):
        r = verdict("monkeypatch_reference")
        self.assertEqual(r["verdict"], "correct")  # zeros compared with zeros
        self.assertIn("Model.forward", r["strict"]["monkeypatch"])
        j = checked(case("monkeypatch_reference")["judge"], "judge")
        self.assertFalse(j["strict_correct"])
        self.assertEqual(j["trials_passed"], 0)

    def test_honest_candidates_patch_nothing_and_mutate_nothing(self):
        for name in ["matmul_correct", "softmax_correct", "topk_correct", "scale_shift_correct"]:
            with self.subTest(name):
                s = verdict(name)["strict"]
                self.assertEqual(s["monkeypatch"], [])
                self.assertFalse(s["input_mutation"])
                self.assertFalse(s["output_poison"], s["output_poison_detail"])
                self.assertEqual(s["check_errors"], {})

    def test_input_mutation_is_reported_for_every_call(self):
        r = verdict("mutates_inputs")
        self.assertEqual(r["verdict"], "correct")  # the reference ran first on the same tensors
        self.assertTrue(r["strict"]["input_mutation"])
        self.assertEqual(len(r["strict"]["input_mutation_calls"]), TRIALS + ROTATIONS)
        # Its outputs on fresh clones are right: only the mutation check sees it.
        self.assertTrue(checked(case("mutates_inputs")["judge"], "judge")["strict_correct"])

    def test_uninitialised_output_shows_torchs_nan_fill(self):
        # The faithful verdict depends on what the allocator hands back (fresh pages are zero):
        # not asserted. torch's NaN fill of uninitialised memory is deterministic.
        s = verdict("uninitialised_output")["strict"]
        self.assertTrue(s["output_poison"])
        self.assertTrue(s["output_poison_detail"]["nan_fill_values_in_output"])

    def test_identity_cache_fools_the_faithful_timing_but_not_the_rotated_timing(self):
        r = verdict("cache_by_identity")
        self.assertEqual(r["verdict"], "correct")
        rt = r["strict"]["rotated_timing"]
        # A dictionary hit (microseconds) against a 256^3 matmul (~0.4 ms): far above 1.5.
        self.assertGreater(rt["paired_median_ratio"], 1.5)
        self.assertTrue(rt["outputs_consistent"])
        self.assertTrue(r["strict"]["rotation_suspect"])
        # Every output it returns is right (fresh clones miss the cache): the judge cannot see it.
        self.assertTrue(checked(case("cache_by_identity")["judge"], "judge")["strict_correct"])

    def test_honest_candidate_is_not_a_rotation_suspect(self):
        rt = verdict("matmul_correct")["strict"]["rotated_timing"]
        # Same work with fresh clones as with fixed inputs: the paired medians stay close to 1.
        self.assertLess(rt["paired_median_ratio"], 1.5)
        self.assertTrue(rt["outputs_consistent"])
        self.assertFalse(verdict("matmul_correct")["strict"]["rotation_suspect"])

    def test_static_scan_flags_try_except_and_threading(self):
        r = verdict("static_flagged")
        self.assertEqual(r["verdict"], "correct")
        self.assertEqual(r["strict"]["static_scan"]["errors"], ["code_bypass", "thread_injection"])
        self.assertIn("torch_computation_ops", r["strict"]["static_scan"]["warnings"])
        self.assertEqual(verdict("softmax_correct")["strict"]["static_scan"]["errors"], [])

    def test_excessive_speedup_is_reported_for_a_slow_reference(self):
        r = verdict("cumsum_fast")
        self.assertEqual(r["verdict"], "correct", r["metadata"])
        # ~5 ms of per-column reductions against one cumsum (~10 us): hundreds of times faster.
        self.assertGreater(r["ref_runtime_ms"] / r["runtime_ms"], 10)
        self.assertTrue(r["metadata"]["excessive_speedup"])
        self.assertTrue(r["strict"]["excessive_speedup"])
        self.assertNotIn("excessive_speedup", verdict("softmax_wrong")["metadata"])

    def test_side_stream_check_is_null_without_cuda(self):
        if torch.cuda.is_available():
            self.skipTest("CUDA present: covered by test_cuda_device_times_with_cuda_events")
        self.assertIsNone(verdict("matmul_correct")["strict"]["side_stream"])

    def test_candidate_outputs_load_with_weights_only(self):
        runs = case("topk_correct")
        saved = torch.load(runs["candidate_outputs"], weights_only=True)
        self.assertEqual(saved["kind"], "candidate")
        self.assertEqual(len(saved["outputs"]), TRIALS)
        self.assertEqual(len(saved["rotation_outputs"]), ROTATIONS)
        values, indices = saved["outputs"][0]
        self.assertEqual((values.dtype, indices.dtype), (torch.float32, torch.int64))
        self.assertEqual(values.device.type, "cpu")


# --- baseline ------------------------------------------------------------------------------


class BaselineTest(unittest.TestCase):
    def test_eager_baseline_times_the_reference(self):
        r = checked(case("baseline_eager"), "baseline")
        self.assertTrue(r["ok"], r.get("error"))
        self.assertFalse(r["compile"])
        self.assertGreater(r["mean_ms"], 0)
        self.assertEqual(r["stats"]["num_trials"], 5)
        self.assertEqual(r["num_warmup"], 5)  # measure_ref_program_time's default
        self.assertEqual(r["hardware"], "cpu")
        # Where the time went; no compile phase for eager.
        self.assertEqual(set(r["phases_s"]), {"start", "load", "inputs", "shared_wait", "build", "exclusive_wait", "timed"})
        self.assertTrue(all(v >= 0 for v in r["phases_s"].values()), r["phases_s"])

    def test_compile_baseline_is_timed(self):
        # CI and every developer's machine have a C++ compiler for inductor: a failed compile is a
        # failure, not an error reported well.
        r = checked(case("baseline_compile"), "baseline")
        self.assertTrue(r["compile"])
        self.assertEqual(r["compile_mode"], "default")
        self.assertTrue(r["ok"], f"{r.get('error')}\n{r.get('traceback', '')[-2000:]}")
        self.assertGreater(r["mean_ms"], 0)
        self.assertEqual(r["stats"]["num_trials"], 5)
        self.assertIn("compile", r["phases_s"])
        # Dynamo and inductor ran with no turn held; one exclusive turn, the timing.
        self.assertGreater(r["gpu_lock"]["compile_off_turn_ms"], 0, r["gpu_lock"])
        self.assertEqual(len(r["gpu_lock"]["exclusive_spans"]), 1)


class JudgeSampleTest(unittest.TestCase):
    """Outputs above JUDGE_SAMPLE_ELEMENTS reach the judge as a sample at the same positions."""

    @classmethod
    def setUpClass(cls):
        cls.saved_limit = compare.JUDGE_SAMPLE_ELEMENTS
        compare.JUDGE_SAMPLE_ELEMENTS = 64

    @classmethod
    def tearDownClass(cls):
        compare.JUDGE_SAMPLE_ELEMENTS = cls.saved_limit

    def saved(self, x):
        # Through the judge's file format: torch.save, then torch.load(weights_only=True).
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "o.pt")
            torch.save(compare.to_saveable(x, sample=True), path)
            return torch.load(path, map_location="cpu", weights_only=True)

    def test_small_outputs_are_saved_whole_and_large_ones_sampled(self):
        self.assertIsInstance(self.saved(torch.ones(64)), torch.Tensor)
        big = self.saved(torch.arange(1000.0).reshape(10, 100))
        self.assertEqual((big["shape"], big["dtype"], big["numel"], big["values"].numel()),
                         ([10, 100], "torch.float32", 1000, 64))

    def test_both_sides_sample_the_same_positions(self):
        x = torch.randn(50, 40)
        ok, reason, diff = compare.compare_judge(self.saved(x), self.saved(x.clone()), 1e-4, True)
        self.assertTrue(ok, reason)
        self.assertEqual(diff, 0.0)

    def test_a_wrong_large_output_fails_and_says_it_was_sampled(self):
        x = torch.randn(50, 40)
        ok, reason, _ = compare.compare_judge(self.saved(x), self.saved(x + 1), 1e-4, True)
        self.assertFalse(ok)
        self.assertIn("at 64 sampled positions of 2000", reason)

    def test_the_rotated_timing_checks_a_large_output_against_its_sample(self):
        model = torch.nn.Identity()
        req = {"device_obj": torch.device("cpu"), "dtype": torch.float32, "tolerance": 1e-4, "seed": 42,
               "switches": {"compare_tuple_outputs": True, "keep_integer_inputs": True}, "num_warmup": 1,
               "rotation_perf_trials": 2, "lock": gpu_lock.GpuLock(None)}
        get_inputs = lambda: [torch.randn(50, 40)]  # noqa: E731
        seeds = [43, 44]
        expected = [compare.to_saveable(model(*problem_module.inputs_for(s, get_inputs, req)), sample=True) for s in seeds]
        self.assertTrue(compare.has_sample(expected[0]))
        r = strict.rotated_timing(model, get_inputs, seeds, expected, req, 1.0)
        self.assertTrue(r["outputs_consistent"])
        r = strict.rotated_timing(lambda x: x + 1, get_inputs, seeds, expected, req, 1.0)
        self.assertFalse(r["outputs_consistent"])

    def test_shape_and_kind_mismatches_fail(self):
        x = torch.randn(50, 40)
        for cand in (self.saved(x.reshape(40, 50)), self.saved(x[:1, :40]), 3.0):
            ok, reason, _ = compare.compare_judge(self.saved(x), cand, 1e-4, True)
            self.assertFalse(ok)
        ok, _, _ = compare.compare_judge(self.saved((x, x[:1])), self.saved((x, x[:1])), 1e-4, True)
        self.assertTrue(ok)


class GpuLockTest(unittest.TestCase):
    """The lock by which harness processes share a GPU. Each GpuLock opens its own file
    descriptions, so two of them in one process exclude each other as two processes would."""

    def setUp(self):
        self.path = tempfile.mktemp(prefix="gpu_lock_", dir=WORKDIR)

    def lock(self):
        return gpu_lock.GpuLock(self.path)

    def held(self, path, mode):
        """Whether some GpuLock holds `path` so that a `mode` flock cannot be had (non-blocking probe)."""
        import fcntl
        fd = os.open(path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)

    def gate_taken_by(self, lock):
        """An Event set when `lock` has taken its gate (the harness's flock calls, observed)."""
        import fcntl
        import types
        from unittest import mock
        taken = threading.Event()

        def flock(fd, op):
            fcntl.flock(fd, op)
            if fd == lock._gate_fd and op == fcntl.LOCK_EX:
                taken.set()

        spy = types.SimpleNamespace(flock=flock, LOCK_EX=fcntl.LOCK_EX, LOCK_SH=fcntl.LOCK_SH, LOCK_UN=fcntl.LOCK_UN)
        patch = mock.patch.object(gpu_lock, "fcntl", spy)
        patch.start()
        self.addCleanup(patch.stop)
        return taken

    def enter_in_thread(self, lock, mode):
        t = threading.Thread(target=lock.enter, args=(mode,), daemon=True)
        t.start()
        return t

    def test_shared_turns_overlap_and_keep_timing_out(self):
        import fcntl
        a, b = self.lock(), self.lock()
        a.enter("shared")
        t = self.enter_in_thread(b, "shared")
        t.join(30)
        self.assertFalse(t.is_alive(), "a second shared turn waited for the first")
        self.assertTrue(self.held(self.path, fcntl.LOCK_EX))
        self.assertFalse(self.held(self.path, fcntl.LOCK_SH))
        a.enter(None)
        b.enter(None)
        self.assertFalse(self.held(self.path, fcntl.LOCK_EX))

    def test_a_waiting_timing_holds_back_new_shared_turns_and_times_alone(self):
        import fcntl
        a, timer, late = self.lock(), self.lock(), self.lock()
        a.enter("shared")
        gate_taken = self.gate_taken_by(timer)
        t = self.enter_in_thread(timer, "exclusive")
        self.assertTrue(gate_taken.wait(30), "the timer never took the gate")
        self.assertTrue(self.held(self.path + ".gate", fcntl.LOCK_EX))
        self.assertIsNone(timer.mode)  # it waits for the shared turn to end
        u = self.enter_in_thread(late, "shared")
        a.enter(None)
        t.join(30)
        self.assertEqual(timer.mode, "exclusive")
        self.assertTrue(u.is_alive())  # queued behind the timer at the gate
        self.assertIsNone(late.mode)
        timer.enter(None)
        u.join(30)
        self.assertEqual(late.mode, "shared")
        self.assertEqual(len(timer.stats["exclusive_spans"]), 1)
        self.assertGreater(timer.stats["exclusive_wait_ms"], 0)
        late.enter(None)

    def test_without_a_path_the_lock_is_a_no_op(self):
        lock = gpu_lock.GpuLock(None)
        lock.enter("exclusive")
        self.assertFalse(lock.active)
        self.assertIsNone(lock.mode)

    def test_torch_compile_compiles_with_no_turn_held_and_runs_and_benchmarks_in_a_shared_turn(self):
        import fcntl
        from unittest import mock
        import torch._dynamo
        from torch._dynamo.callback import CallbackArgs, CallbackTrigger, callback_handler
        from torch._inductor.fx_passes import pad_mm
        from torch._inductor.runtime import benchmarking
        bench = benchmarking.benchmarker
        should_pad = pad_mm._should_pad
        cpu = torch.device("cpu")
        lock = self.lock()
        lock.enter("shared")
        seen = {}

        def benchmark_gpu(*_args, **_kwargs):  # stands for inductor's GPU benchmark
            seen["benchmark"] = (lock.mode, self.held(self.path, fcntl.LOCK_EX))
            return 1.0

        def pads(*_args, **_kwargs):  # stands for pad_mm's decision (random operands on the device)
            seen["pad_mm"] = lock.mode
            return False

        def backend(gm, _example_inputs):  # runs inside dynamo's compile, as inductor does
            # No turn: another process may take the exclusive turn and time while this compiles.
            seen["compile"] = (lock.mode, self.held(self.path, fcntl.LOCK_EX))
            bench.benchmark_gpu(lambda: None)
            seen["after_benchmark"] = lock.mode
            pad_mm._should_pad(None, None, None, None)
            # A CUDA-graph recording fires the same handler: GPU work, the turn stays as it is.
            callback_handler.run_start_callbacks(CallbackArgs(CallbackTrigger.CUDAGRAPH_RECORDING, "0/0"))
            seen["recording"] = lock.mode

            def run(*args):
                seen["run"] = (lock.mode, self.held(self.path, fcntl.LOCK_EX))
                return gm(*args)
            return run

        torch._dynamo.reset()
        with mock.patch.object(type(bench), "benchmark_gpu", benchmark_gpu), \
                mock.patch.object(pad_mm, "_should_pad", pads):
            with gpu_lock.compile_off_turn(lock, cpu, "default"):
                out = torch.compile(lambda x: x * 2 + 1, backend=backend)(torch.ones(4))
            self.assertNotIn("benchmark_gpu", vars(bench))  # unwrapped again
            self.assertIs(pad_mm._should_pad, pads)
        self.assertIs(pad_mm._should_pad, should_pad)
        self.assertTrue(torch.equal(out, torch.full((4,), 3.0)))
        self.assertEqual(seen["compile"], (None, False))
        self.assertEqual(seen["benchmark"], ("shared", True))
        self.assertIsNone(seen["after_benchmark"])
        self.assertEqual(seen["pad_mm"], "shared")
        self.assertIsNone(seen["recording"])
        self.assertEqual(seen["run"], ("shared", True))  # the compiled code runs in the shared turn
        self.assertEqual(lock.mode, "shared")
        self.assertEqual(lock.stats["compile_benchmarks"], 2)
        self.assertGreater(lock.stats["compile_off_turn_ms"], 0)
        self.assertEqual(callback_handler.start_callbacks, [])
        self.assertEqual(callback_handler.end_callbacks, [])

        # max-autotune benchmarks its choices from many places: the compile keeps the shared turn.
        torch._dynamo.reset()
        with mock.patch.object(type(bench), "benchmark_gpu", benchmark_gpu), \
                mock.patch.object(pad_mm, "_should_pad", pads):
            with gpu_lock.compile_off_turn(lock, cpu, "max-autotune"):
                torch.compile(lambda x: x + 2, backend=backend)(torch.ones(4))
        self.assertEqual(seen["compile"], ("shared", True))

        def broken(_gm, _example_inputs):
            raise RuntimeError("backend fails")

        torch._dynamo.reset()
        with self.assertRaises(Exception):
            with gpu_lock.compile_off_turn(lock, cpu, "default"):
                torch.compile(lambda x: x - 1, backend=broken)(torch.ones(4))
        self.assertEqual(lock.mode, "shared")  # a failed compile gives the turn back
        lock.enter(None)
        self.assertFalse(self.held(self.path, fcntl.LOCK_EX))

    def test_two_baselines_sharing_a_lock_time_one_after_the_other(self):
        runs = case("baseline_locked_pair")
        spans = []
        for run in runs:
            r = checked(run, "baseline")
            self.assertTrue(r["ok"], r.get("error"))
            self.assertEqual(r["stats"]["num_trials"], 20)
            self.assertEqual(len(r["gpu_lock"]["exclusive_spans"]), 1)
            # The first call compiles nothing in eager mode; with a lock the phases are all there.
            self.assertNotIn("compile", r["phases_s"])
            self.assertGreater(r["phases_s"]["timed"], 0)
            spans.append(r["gpu_lock"]["exclusive_spans"][0])
        spans.sort()
        self.assertLessEqual(spans[0][1], spans[1][0], f"exclusive turns overlap: {spans}")

    def test_a_candidate_takes_the_exclusive_turn_for_each_timed_section_only(self):
        # The candidate's timing, the reference's, the rotated timing (and on a GPU the side-stream
        # check): a turn each, inputs made outside them; two processes' turns never overlap.
        spans = []
        for run in case("candidate_locked_pair"):
            r = checked(run, "candidate")
            self.assertEqual(r["verdict"], "correct", r["metadata"])
            self.assertIsNotNone(r["strict"]["rotated_timing"], r["strict"]["check_errors"])
            own = r["gpu_lock"]["exclusive_spans"]
            self.assertEqual(len(own), 4 if CUDA else 3, own)
            spans += own
        spans.sort()
        for earlier, later in zip(spans, spans[1:]):
            self.assertLessEqual(earlier[1], later[0], f"exclusive turns overlap: {spans}")

    def test_get_inputs_and_the_checksum_run_with_no_turn_held(self):
        # A shared turn held through get_inputs would hold every waiting timing as long.
        import fcntl
        lock = self.lock()
        req = {"lock": lock, "device_obj": torch.device("cpu"), "dtype": torch.float32,
               "switches": {"keep_integer_inputs": True}}
        seen = []

        def get_inputs():
            seen.append((lock.mode, self.held(self.path, fcntl.LOCK_EX)))
            return [torch.ones(3, dtype=torch.float64), 7]

        lock.enter("shared")
        sums = []
        inputs = problem_module.inputs_for(5, get_inputs, req, sums)
        self.assertEqual(seen, [(None, False)])
        self.assertEqual(lock.mode, "shared")
        self.assertTrue(self.held(self.path, fcntl.LOCK_EX))
        self.assertEqual(inputs[0].dtype, torch.float32)
        self.assertEqual(sums, [compare.input_checksum([torch.ones(3, dtype=torch.float64), 7])])
        lock.enter(None)
        lock.enter("exclusive")  # a caller inside a timed section keeps it
        problem_module.inputs_for(5, get_inputs, req)
        self.assertEqual(seen[-1], ("exclusive", True))
        self.assertEqual(len(lock.stats["exclusive_spans"]), 1)
        lock.enter(None)

    def test_an_exclusive_turn_returns_to_the_shared_turn(self):
        import fcntl
        lock, other = self.lock(), self.lock()
        lock.enter("shared")
        with gpu_lock.exclusive_turn(lock):
            self.assertEqual(lock.mode, "exclusive")
            self.assertTrue(self.held(self.path, fcntl.LOCK_SH))
        self.assertEqual(lock.mode, "shared")
        other.enter("shared")  # shared turns overlap again
        self.assertEqual(len(lock.stats["exclusive_spans"]), 1)
        lock.enter(None)
        other.enter(None)


# --- bad requests -----------------------------------------------------------------------------


class BadRequestTest(unittest.TestCase):
    def assert_bad(self, request, needle):
        run = run_harness(request)
        self.assertEqual(run.returncode, 2, run.stderr[-2000:])
        self.assertIsNone(run.result)
        self.assertIn(needle, run.stderr)

    def test_unknown_mode_unknown_key_and_missing_candidate_exit_2(self):
        matmul = problem(L1 + "1_Matmul.py")
        self.assert_bad(dict(BASE_REQUEST, mode="evaluate", problem_path=matmul), '"mode" must be one of')
        self.assert_bad(dict(BASE_REQUEST, mode="baseline", problem_path=matmul, num_perf_trial=3),
                        "unknown request key(s) ['num_perf_trial']")
        self.assert_bad(dict(BASE_REQUEST, mode="candidate", problem_path=matmul,
                             candidate_path=candidate("does_not_exist.py")), "is not a file")

    def test_a_problem_that_fails_before_the_candidate_runs_exits_2(self):
        path = os.path.join(WORKDIR, "no_model_problem.py")
        with open(path, "w") as f:
            f.write("def get_inputs():\n    return []\n\ndef get_init_inputs():\n    return []\n")
        self.assert_bad(dict(BASE_REQUEST, mode="candidate", problem_path=path,
                             candidate_path=candidate("matmul_correct.py")), "does not define ['Model']")

    @unittest.skipIf(torch.cuda.is_available(), "CUDA present")
    def test_cuda_device_without_cuda_exits_2(self):
        self.assert_bad(dict(BASE_REQUEST, mode="baseline", device="cuda:0", problem_path=problem(L1 + "1_Matmul.py")),
                        "torch.cuda.is_available() is false")


# --- the verdict table ------------------------------------------------------------------------


def _flag(v):
    return "-" if v is None else ("yes" if v else "no")


def verdict_table():
    rows = [("case", "problem", "verdict", "trials", "ms", "ref ms", "judge", "mutation", "poison",
             "rotation (paired ratio)", "side stream", "patched", "static errors")]
    for name in CASES:
        fut = _futures.get(name)
        if fut is None or not fut.done() or fut.exception() or CASES[name][0] is not evaluate:
            continue
        runs = fut.result()
        r = runs["candidate"].result
        if r is None:
            continue
        s = r.get("strict") or {}
        judge = runs.get("judge")
        jr = judge.result if judge else None
        rows.append((name, os.path.basename(_CASE_PROBLEM[name]), r["verdict"],
                     r["metadata"].get("correctness_trials", "-"),
                     f"{r['runtime_ms']:.3g}" if r["runtime_ms"] > 0 else "-",
                     f"{r['ref_runtime_ms']:.3g}" if r["ref_runtime_ms"] > 0 else "-",
                     "-" if not jr else ("pass" if jr.get("strict_correct") else "FAIL"),
                     _flag(s.get("input_mutation")), _flag(s.get("output_poison")),
                     _flag(s.get("rotation_suspect")) + (f" ({s['rotated_timing']['paired_median_ratio']:.3g})"
                                                         if s.get("rotated_timing") else ""),
                     _flag(s.get("side_stream")),
                     ",".join(s.get("monkeypatch") or []) or "-",
                     ",".join(s.get("static_scan", {}).get("errors", [])) or "-"))
    if "hangs" in _futures and _futures["hangs"].done():
        rows.append(("hangs", "1_Matmul.py", "killed (timeout)" if _futures["hangs"].result().timed_out else "?",
                     "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip() for row in rows)


if __name__ == "__main__":
    if GPU_RUN:
        sys.argv.remove("--gpu")
        if not CUDA:
            print("kernelbench harness GPU tests: skipped, torch sees no CUDA device")
            sys.exit(77)
        program = unittest.main(exit=False, verbosity=2, defaultTest="CudaTest")
    else:
        program = unittest.main(exit=False, verbosity=2)
    print("\n" + verdict_table())
    print(f"\nkernelbench harness tests: {time.monotonic() - _T0:.1f} s")
    sys.exit(0 if program.result.wasSuccessful() else 1)
