"""The witness's runners (`harness --witness-runner`; HARNESS.md, "witness") and what the witness and
a runner share: memory blocks (CUDA IPC on a GPU, a shared file mapping on the CPU) and frames.

A runner is untrusted once it has loaded candidate code: it only ever receives frames from its
parent, the witness, and answers in bounded lines that the witness parses strictly."""

import ctypes
import math
import os
import pickle
import struct
import sys

import torch

from .problem import build_reference, load_candidate, load_problem_source
from .request import PRECISIONS
from .timing import get_error_name, set_seed, synchronize

ANSWER_MAX_BYTES = 4096
FRAME_MAX_BYTES = 1 << 20


class Unsupported(Exception):
    """The problem's inputs or outputs cannot be handed over through fixed buffers."""


# ---------------------------------------------------------------------------------------------
# Shared buffers: CUDA IPC memory on a GPU, a shared file mapping on the CPU
# ---------------------------------------------------------------------------------------------


def _cudart(device):
    """The CUDA runtime torch loaded (its soname differs between CUDA versions), on the device."""
    with open("/proc/self/maps", encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and os.path.basename(fields[-1]).startswith("libcudart.so"):
                rt = ctypes.CDLL(fields[-1])
                if rt.cudaSetDevice(ctypes.c_int(device.index or 0)) != 0:
                    raise RuntimeError(f"cudaSetDevice({device.index or 0}) failed")
                return rt
    raise OSError("torch's CUDA runtime (libcudart) is not loaded in this process")


class _Handle(ctypes.Structure):
    # Bytes, not chars: a c_char array reads back only up to its first zero byte.
    _fields_ = [("reserved", ctypes.c_ubyte * 64)]


class _CudaBuffer:
    """A cudaMalloc'd block of its own (never a slice of torch's cache), seen as a uint8 tensor."""

    def __init__(self, ptr, nbytes, device):
        self.ptr, self.nbytes = ptr, nbytes
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 2}
        self.tensor = torch.as_tensor(self, device=device)


def make_buffer(device, nbytes):
    """(uint8 tensor of nbytes, a description the runner opens it from, the descriptor to pass it
    or None). On the CPU an anonymous memfd that only the runner it is passed to can map."""
    nbytes = max(nbytes, 1)
    if device.type == "cuda":
        rt = _cudart(device)
        ptr = ctypes.c_void_p()
        if (err := rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(nbytes))) != 0:
            raise RuntimeError(f"cudaMalloc of {nbytes} bytes failed (error {err})")
        handle = _Handle()
        if (err := rt.cudaIpcGetMemHandle(ctypes.byref(handle), ptr)) != 0:
            raise RuntimeError(f"cudaIpcGetMemHandle failed (error {err})")
        buf = _CudaBuffer(ptr.value, nbytes, device)
        return buf.tensor, {"kind": "cuda", "handle": bytes(handle.reserved), "nbytes": nbytes}, None
    fd = os.memfd_create("ak-witness")
    os.ftruncate(fd, nbytes)
    t = torch.from_file(f"/proc/self/fd/{fd}", shared=True, size=nbytes, dtype=torch.uint8)
    return t, {"kind": "fd", "fd": fd, "nbytes": nbytes}, fd


def open_buffer(desc, device):
    if desc["kind"] == "cuda":
        rt = _cudart(device)
        handle = _Handle()
        ctypes.memmove(handle.reserved, desc["handle"], len(desc["handle"]))
        ptr = ctypes.c_void_p()
        if (err := rt.cudaIpcOpenMemHandle(ctypes.byref(ptr), handle, ctypes.c_uint(1))) != 0:  # lazy peer access
            raise RuntimeError(f"cudaIpcOpenMemHandle failed (error {err})")
        return _CudaBuffer(ptr.value, desc["nbytes"], device).tensor
    t = torch.from_file(f"/proc/self/fd/{desc['fd']}", shared=True, size=desc["nbytes"], dtype=torch.uint8)
    os.close(desc["fd"])
    return t




# ---------------------------------------------------------------------------------------------
# Frames (witness -> runner) and answers (runner -> witness)
# ---------------------------------------------------------------------------------------------


def frame(obj):
    data = pickle.dumps(obj)
    return struct.pack("<I", len(data)) + data


def read_frame(stream):
    head = stream.read(4)
    if len(head) != 4:
        raise EOFError("the witness closed the pipe")
    (n,) = struct.unpack("<I", head)
    if n > FRAME_MAX_BYTES:
        raise ValueError(f"frame of {n} bytes")
    return pickle.loads(stream.read(n))  # the witness's own frames: the runner trusts its parent


def nbytes(shape, dtype):
    return math.prod(shape) * dtype.itemsize


def view(block, offset, shape, dtype):
    """The bytes of `block` from `offset` seen as a contiguous tensor of `shape` and `dtype`."""
    return block[offset: offset + nbytes(shape, dtype)].view(dtype).view(shape)


def slot_views(block, layout):
    """Per call of a round, (inputs: a tensor's view in the block, a plain value as given; output
    views), from the layout the witness made (witness.py, _Rounds)."""
    return [([d[1] if d[0] == "v" else view(block, *d[1:]) for d in s["inputs"]],
             [view(block, *d) for d in s["outputs"]]) for s in layout]


def flat_outputs(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and out and all(isinstance(t, torch.Tensor) for t in out):
        return list(out)
    raise Unsupported(f"the reference returns {type(out).__name__}, not a tensor or a tuple of tensors")



# ---------------------------------------------------------------------------------------------
# The runner (`harness --witness-runner`): untrusted once candidate code is loaded
# ---------------------------------------------------------------------------------------------


def run_runner():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(1, 9, 0, 0, 0) != 0:  # PR_SET_PDEATHSIG, SIGKILL: die with the witness
        print("error prctl(PR_SET_PDEATHSIG) failed", flush=True)
        return 0
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what the candidate prints goes to the log, never into the answers
    answers.write("up\n")  # torch is imported: this process is idle until its setup comes
    stdin = sys.stdin.buffer
    try:
        setup = read_frame(stdin)
        device = torch.device(setup["device"])
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dtype = PRECISIONS[setup["precision"]]
        req = {"device_obj": device, "dtype": dtype, "switches": setup["switches"], "seed": setup["seed"]}
        # The sources come in the frame, read by the witness before any runner existed: a file in the
        # job's folder could be rewritten by the candidate while the reference runner starts.
        loaded = load_problem_source(setup["problem_source"], "problem")
        model, init_inputs = build_reference(req, loaded)
        if setup["candidate_source"] is not None:
            ModelNew, _ = load_candidate(setup["candidate_source"], loaded[1], setup["backend"], setup["build_dir"])
            if ModelNew is None:
                raise RuntimeError("no ModelNew")
            with torch.no_grad():
                set_seed(setup["seed"])
                model = ModelNew(*init_inputs)
        model = model.to(device=device, dtype=dtype)
        block = open_buffer(setup["block"], device)
        slots = slot_views(block, setup["slots"])
        synchronize(device)
    except BaseException as e:  # noqa: B036 - said to the witness, which fails the round
        answers.write(f"error {get_error_name(e)}: {str(e)[:300]}".replace("\n", " ") + "\n")
        return 0
    answers.write("ready\n")
    while True:
        try:
            order = read_frame(stdin)
        except EOFError:
            return 0
        if not isinstance(order, dict) or "run" not in order:
            return 0
        try:
            with torch.no_grad():
                for (ins, outs), seed in zip(slots, order["run"]):
                    set_seed(seed)  # the forward's own randomness, as the witness's reference draws it
                    produced = flat_outputs(model(*ins))
                    if len(produced) != len(outs):
                        raise RuntimeError(f"{len(produced)} outputs where {len(outs)} were expected")
                    for o, p in zip(outs, produced):
                        if tuple(p.shape) != tuple(o.shape) or p.dtype != o.dtype:
                            raise RuntimeError(f"an output of {p.dtype} {tuple(p.shape)} where {o.dtype} "
                                               f"{tuple(o.shape)} was expected")
                        o.copy_(p)
            synchronize(device)
        except BaseException as e:  # noqa: B036
            answers.write(f"error {get_error_name(e)}: {str(e)[:300]}".replace("\n", " ") + "\n")
            return 0
        answers.write("done\n")
