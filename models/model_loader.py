"""Loading a model for the farm's pipeline (models/README.md, "The model contract").

A model is named by one of:
  path/to/file.py              a user's file: build_model() and example_inputs(), or KernelBench's
                               Model, get_inputs() and get_init_inputs()
  examples/NAME[:CONFIG]       a built-in example (models/examples/NAME.py), e.g. examples/llama:7b-4l
  hf:ARCH                      a Hugging Face transformers architecture built from its default
                               configuration, with random weights (transformers is an optional extra)

The farm owns dtype and device: floating-point parameters, buffers and inputs are cast to the run's
dtype and everything is moved to its device; integer inputs (token ids) keep their dtype.
Every failure is a ModelError whose message names the cause and the model.
"""
import importlib.util
import json
import os
import sys
import traceback

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


class ModelError(Exception):
    """A model that cannot be loaded or run; the message is for the user."""


def _import_file(path):
    if not os.path.isfile(path):
        raise ModelError(f"model file {path} does not exist or is not a regular file")
    name = "ak_model_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModelError(f"model file {path} cannot be imported (expected a Python source file)")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except BaseException as e:  # a model file may raise anything, SystemExit included
        tb = traceback.extract_tb(e.__traceback__)
        where = next((f"{f.filename}:{f.lineno}" for f in reversed(tb) if f.filename == path), path)
        raise ModelError(f"model file {path} raised on import at {where}: {type(e).__name__}: {e}") from None
    return module


def _call(what, fn, *args):
    try:
        return fn(*args)
    except torch.cuda.OutOfMemoryError:
        raise
    except BaseException as e:
        raise ModelError(f"{what} raised {type(e).__name__}: {e}") from None


def _from_module(module, label, config):
    args = (config,) if config is not None else ()
    if hasattr(module, "build_model") and hasattr(module, "example_inputs"):
        model = _call(f"{label}: build_model()", module.build_model, *args)
        inputs = _call(f"{label}: example_inputs()", module.example_inputs, *args)
    elif hasattr(module, "Model") and hasattr(module, "get_inputs"):
        init = _call(f"{label}: get_init_inputs()", module.get_init_inputs) if hasattr(module, "get_init_inputs") else []
        model = _call(f"{label}: Model(*get_init_inputs())", module.Model, *init)
        inputs = _call(f"{label}: get_inputs()", module.get_inputs)
    else:
        raise ModelError(
            f"{label} defines neither build_model() and example_inputs() nor KernelBench's Model and "
            "get_inputs(); see models/README.md for the contract")
    if not isinstance(model, torch.nn.Module):
        raise ModelError(f"{label}: the model is a {type(model).__name__}, expected a torch.nn.Module")
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, (list, tuple)):
        raise ModelError(f"{label}: the example inputs are a {type(inputs).__name__}, expected a tuple or list")
    return model, tuple(inputs)


def _hf(arch):
    try:
        import transformers
    except ImportError:
        raise ModelError(f"hf:{arch} needs the transformers package; install the set-up script's "
                         "optional extra (README.md)") from None
    mapping = transformers.CONFIG_MAPPING
    if arch not in mapping:
        known = ", ".join(sorted(mapping.keys())[:20])
        raise ModelError(f"hf:{arch} is not a transformers architecture (model_type); some known: {known} ...")
    config = mapping[arch]()
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(config)
    vocab = getattr(config, "vocab_size", 1000)
    g = torch.Generator().manual_seed(1)
    return model, (torch.randint(0, vocab, (1, 128), generator=g),)


def resolve(name):
    """(module or None, label, config) for a model name, or ModelError."""
    if name.startswith("examples/") or name.startswith("example:"):
        rest = name.split("/", 1)[1] if name.startswith("examples/") else name.split(":", 1)[1]
        base, _, config = rest.partition(":")
        path = os.path.join(HERE, "examples", base + ".py")
        if not base.isidentifier() or not os.path.isfile(path):
            known = sorted(f[:-3] for f in os.listdir(os.path.join(HERE, "examples")) if f.endswith(".py"))
            raise ModelError(f"no example model '{base}'; examples: {', '.join(known)}")
        module = _import_file(path)
        configs = getattr(module, "CONFIGS", {})
        if config and config not in configs:
            raise ModelError(f"example {base} has no configuration '{config}'; it has: {', '.join(configs)}")
        return module, f"examples/{base}" + (f":{config}" if config else ""), config or None
    return _import_file(name), name, None


def cast(value, device, dtype):
    if isinstance(value, torch.Tensor):
        return value.to(device=device, dtype=dtype) if value.is_floating_point() else value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(cast(v, device, dtype) for v in value)
    return value


def load(name, device, dtype_name):
    """(model in eval mode on device and dtype, inputs, label) or ModelError."""
    if dtype_name not in DTYPES:
        raise ModelError(f"dtype '{dtype_name}' is not one of {', '.join(DTYPES)}")
    if name.startswith("hf:"):
        model, inputs = _hf(name[3:])
        label = name
    else:
        module, label, config = resolve(name)
        model, inputs = _from_module(module, label, config)
    dtype = DTYPES[dtype_name]
    model = model.to(device=device, dtype=dtype).eval()
    return model, cast(inputs, device, dtype), label


def describe(exc):
    """A one-line cause for an exception raised while running a model."""
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return "the model ran out of GPU memory: " + str(exc).split("\n")[0]
    return f"{type(exc).__name__}: {exc}"


def add_step_arguments(ap):
    """The arguments every model step takes: --model, --device, --dtype, --out."""
    ap.add_argument("--model", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="fp32", choices=sorted(DTYPES))
    ap.add_argument("--out", required=True)


def write_report(path, report):
    """Writes a step's JSON report beside and renames it, so no reader sees half of one."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
    os.replace(tmp, path)


def fail(path, report, code, message):
    """A step's failure: the report with its "error", the message on stderr; returns the exit code."""
    report["error"] = message
    write_report(path, report)
    print(message, file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit("models/model_loader.py is a module; run models/profile_model.py")
