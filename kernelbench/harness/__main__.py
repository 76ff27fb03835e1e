"""The KernelBench-faithful harness and the farm's strict checks.

    python kernelbench/harness REQUEST_JSON_PATH     (this folder)
    python harness-<pid>-<hash>.pyz REQUEST_JSON_PATH (the zipapp a worker runs, built from it)
    python ... --serve                               (the fork server, serve.py)

The worker runs it as a subprocess inside its sandbox. It reads one request (JSON), writes ONE
JSON object to request["result_path"] (written under a temporary name, then renamed) and exits 0
whenever that object was written, even for a failed candidate; it exits 2 for a bad request (the
reason on stderr, nothing written) and 1 if the harness itself failed. Nothing is read from
stdout: candidate code may print anything there.

The protocol, the request and result schemas, and every deviation from KernelBench with the switch
that controls it are documented in kernelbench/HARNESS.md; the modules follow that document. The
faithful path mirrors ScalingIntelligence/KernelBench src/kernelbench/eval.py
(eval_kernel_against_ref, run_and_check_correctness), timing.py (time_execution_with_cuda_event,
get_timing_stats, measure_ref_program_time) and kernel_static_checker.py, step for step.

Modules: request (parsing), gpu_lock (turns on a shared GPU), timing, problem (loading problem
and candidate, inputs), compare (comparison, saved outputs), scan (static scan, monkeypatch
check), modes (reference, baseline, judge), candidate, strict (the strict checks), witness (timing
and outputs seen from outside the candidate's process), main (one
step as a process), serve (the fork server). pinned is imported first, before torch.
"""

import os
import sys

if __name__ == "__main__":
    if not __package__:
        # Run as a folder (python kernelbench/harness): import the modules as the package `harness`
        # from the folder above. The zipapp's own __main__ (kernelbench/build_zipapp.py) imports
        # them from the archive's root.
        sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        import harness.pinned  # noqa: F401 - first: the start time and the pinned functions
        from harness.main import run
    else:  # python -m harness
        from . import pinned  # noqa: F401
        from .main import run
    run(sys.argv)
