"""The fork server (HARNESS.md, "Fork server"): `python <harness> --serve`.

torch, dynamo and inductor are imported once, then each step is a forked child, so a step starts
in milliseconds instead of seconds. The worker (worker/kernelbench_runner.cc, run_in_server and
ensure_server) speaks this line protocol with it; each line ends in "\n".

Server to worker, on stdout (nothing else is written there; imports may print lines of their own
before "ready", which the worker skips):
    ready                      the imports are done; orders are read from now on
    refused <reason>           it will not serve (CUDA's driver is loaded in it); exits 3 at once
    started <pid>              an order's child was forked; <pid> leads its own process group,
                               set by both sides before this line is written, so killing -<pid>
                               reaches the whole step
    exited <pid> <code>        that child ended; <code> as a shell gives it (128 + N for signal N)
    bad order <repr>           the line was not an order; nothing was started

Worker to server, on stdin, one order per line, one at a time (the next after "exited"):
    {"request": REQUEST_JSON_PATH, "log": LOG_PATH}
The child writes its stdout and stderr to LOG_PATH (created or truncated), reads nothing, and runs
main.main() on REQUEST_JSON_PATH exactly as `python <harness> REQUEST_JSON_PATH` would, result file
and exit code included. Blank lines are ignored; the end of stdin ends the server (exit 0). A child
dies with the server (PR_SET_PDEATHSIG).
"""

import gc
import importlib
import json
import os
import sys
import time
import traceback

import torch

from . import pinned
from .gpu_lock import COMPILER_MODULES
from .main import exit_code, main


def _cuda_driver_loaded():
    """Whether libcuda is mapped into this process: the driver was loaded (and maybe initialised),
    after which a forked child cannot use CUDA."""
    with open("/proc/self/maps") as f:
        return any("libcuda.so" in line for line in f)


def serve():
    """Serves steps by the protocol above until the end of stdin; returns the exit code. Refuses
    (exit 3) when CUDA's driver is already loaded here: the parent of a fork must never have
    touched CUDA."""
    import ctypes
    import signal as signals
    for module in COMPILER_MODULES:
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
                pinned.STARTED = time.monotonic()  # the step's "start" phase begins at the fork
                code = exit_code(main, ["harness", request])
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
