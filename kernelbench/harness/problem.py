"""Loading a problem and a candidate as KernelBench does (eval.py), the reference model, and each
trial's inputs."""

import importlib.util
import os
import tempfile

import torch

from .compare import input_checksum
from .request import ProblemError
from .timing import get_error_name, set_seed, synchronize


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
    return load_problem_source(src, path)


def load_problem_source(src, path):
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


def build_reference(req, context_tuple):
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


def inputs_for(seed, get_inputs, req, checksum=None):
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
            checksum.append(input_checksum(raw))
    finally:
        lock.enter(held)
    if checksum is not None and not on_cpu:  # a problem that makes its inputs on the GPU: in the turn
        checksum.append(input_checksum(raw))
    return [process_input(x, req["device_obj"], req["dtype"], req["switches"]) for x in raw]


def outputs_meta(req):
    return {"precision": req["precision"], "seed": req["seed"], "switches": req["switches"],
            "num_correct_trials": req["num_correct_trials"], "rotations": req["rotations"],
            "device": str(req["device_obj"])}


def cast_baseline(x, device, dtype, switches):
    if not isinstance(x, torch.Tensor):
        return x
    if switches["keep_integer_inputs"] and not x.is_floating_point():
        return x.to(device=device)
    return x.to(device=device, dtype=dtype)


def timer_name(device):
    return "cuda_event" if device.type == "cuda" else "host_perf_counter"
