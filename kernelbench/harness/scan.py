"""The static scan (KernelBench kernel_static_checker.py, validate_kernel_static, by category) and the
monkeypatch check (strict): which torch/time functions or problem classes a candidate rebound."""

import re
import time
import types

import torch
import torch.nn as nn


def _strip_comments(code):
    lines = []
    for line in code.split("\n"):
        if "#" in line:
            line = line[: line.index("#")]
        if "//" in line:
            line = line[: line.index("//")]
        lines.append(line)
    return "\n".join(lines)


_TORCH_COMPUTATION_OPS = [
    "torch.mm", "torch.bmm", "torch.matmul", "torch.einsum",
    "torch.conv1d", "torch.conv2d", "torch.conv3d", "torch.conv",
    "torch.conv_transpose1d", "torch.conv_transpose2d", "torch.conv_transpose3d",
    "torch.avg_pool1d", "torch.avg_pool2d", "torch.avg_pool3d",
    "torch.max_pool1d", "torch.max_pool2d", "torch.max_pool3d",
    "torch.adaptive_avg_pool1d", "torch.adaptive_avg_pool2d", "torch.adaptive_avg_pool3d",
    "torch.adaptive_max_pool1d", "torch.adaptive_max_pool2d", "torch.adaptive_max_pool3d",
    "torch.relu", "torch.hardtanh", "torch.elu", "torch.selu",
    "torch.leaky_relu", "torch.gelu", "torch.softsign", "torch.softplus",
    "torch.softmax", "torch.log_softmax", "torch.tanh", "torch.sigmoid",
    "torch.hardsigmoid", "torch.silu", "torch.mish",
    "torch.batch_norm", "torch.group_norm", "torch.layer_norm",
    "torch.instance_norm", "torch.rms_norm", "torch.normalize",
    "torch.linear", "torch.cross_entropy", "torch.kl_div", "torch.mse_loss",
    "torch.huber_loss", "torch.triplet_margin_loss", "torch.cosine_similarity",
    "torch.logsumexp", "torch.clamp", "torch.dropout",
]

_SCAN_PATTERNS = {
    "code_bypass": [r"\btry\s*:", r"\bexcept\s*:", r"\bexcept\s+\w+", r"\bpass\b"],
    "timing_event_patch": [
        r"torch\.cuda\.Event\.record\s*=", r"torch\.cuda\.Event\.elapsed_time\s*=",
        r"torch\.cuda\.synchronize\s*=", r"torch\.cuda\.Event\s*=", r"time\.perf_counter\s*=",
        r"time\.time\s*=",
    ],
    "thread_injection": [
        r"threading\.Thread\s*\(", r"import\s+threading", r"from\s+threading\s+import",
        r"multiprocessing\.(Process|Pool|Manager|Queue|Pipe)", r"import\s+multiprocessing",
        r"concurrent\.futures", r"ThreadPoolExecutor", r"ProcessPoolExecutor",
    ],
    "lazy_eval": [r"_make_subclass", r"class\s+\w+.*\(torch\.Tensor\)", r"class\s+\w+.*\(Tensor\)",
                  r"torch\.Tensor\.__new__"],
    "pytorch_wrap": [r"torch\.nn\.(?!(Module|parameter|Parameter|ParameterList|ParameterDict|ModuleList|ModuleDict|init)\b)"],
    "torch_computation_ops": [
        r"\b(" + "|".join(re.escape(f) for f in _TORCH_COMPUTATION_OPS) + r")(?=\s*\(|\s|$)",
        r"torch\.nn\.functional\.\w+", r"\bnn\.functional\.\w+",
        r"\bF\.(conv|linear|relu|gelu|softmax|batch_norm|layer_norm|dropout|max_pool|avg_pool)",
    ],
    "stream_injection": [r"torch\.cuda\.Stream\s*\(", r"cuda\.Stream\s*\(", r"with\s+torch\.cuda\.stream",
                         r"\.wait_stream\s*\(", r"\.record_stream\s*\("],
    "precision_downgrade": [
        r"__float2half(_rn)?\s*\(", r"\(\s*__half\s*\)\s*[\w\->\.]+", r"static_cast\s*<\s*(__half|half)\s*>\s*\(",
        r"tl\.astype\s*\(\s*[^,]+,\s*tl\.float16\s*\)", r"NumericConverter\s*<\s*half_t\s*,\s*float\s*>",
        r"LinearCombination\s*<\s*half_t", r"type_convert\s*<\s*half_t\s*>\s*\(", r"tk::half\s*\(",
        r"\.half\s*\(", r"\.float16\s*\(", r"\.to\s*\(\s*torch\.(float16|half)\b",
        r"\.to\s*\(\s*dtype\s*=\s*torch\.(float16|half)\b",
    ],
}
_STRICT_CATEGORIES = ("code_bypass", "timing_event_patch", "thread_injection", "lazy_eval")
_WARNING_CATEGORIES = ("pytorch_wrap", "torch_computation_ops", "stream_injection", "precision_downgrade")


def static_scan(code, backend, precision):
    """{"errors": [category...], "warnings": [category...], "matches": {category: text}}."""
    code = _strip_comments(code)
    errors, warns, matches = [], [], {}
    for category in _STRICT_CATEGORIES + _WARNING_CATEGORIES:
        if category == "precision_downgrade" and precision != "fp32":
            continue
        for pattern in _SCAN_PATTERNS[category]:
            m = re.search(pattern, code)
            if m:
                (errors if category in _STRICT_CATEGORIES else warns).append(category)
                matches[category] = m.group(0)
                break
    if backend == "cuda":
        if "__global__" not in code:
            errors.append("cuda_impl")
            matches["cuda_impl"] = "missing __global__ kernel definition"
        elif not any(p in code for p in ("load_inline", "cpp_extension")):
            errors.append("cuda_impl")
            matches["cuda_impl"] = "missing load_inline or cpp_extension"
    elif backend == "triton":
        if not re.search(r"@triton\.(jit|autotune)", code):
            errors.append("triton_impl")
            matches["triton_impl"] = "missing @triton.jit or @triton.autotune"
        elif not re.search(r"\btl\.\w+", code):
            errors.append("triton_impl")
            matches["triton_impl"] = "no tl.* operations"
    return {"errors": sorted(errors), "warnings": sorted(warns), "matches": matches}


# ---------------------------------------------------------------------------------------------
# Monkeypatch detection (strict): which torch/time functions or problem classes were rebound
# ---------------------------------------------------------------------------------------------


def _patch_targets(context, original_model):
    import torch.nn.functional as F

    targets = [("torch", torch), ("torch.nn.functional", F), ("torch.Tensor", torch.Tensor),
               ("torch.nn.Module", nn.Module), ("torch.cuda", torch.cuda), ("time", time),
               ("torch.linalg", torch.linalg), ("torch.fft", torch.fft), ("torch.special", torch.special)]
    if hasattr(torch.cuda, "Event"):
        targets.append(("torch.cuda.Event", torch.cuda.Event))
    for name in dir(nn):
        cls = getattr(nn, name)
        if isinstance(cls, type) and issubclass(cls, nn.Module) and cls is not nn.Module:
            targets.append((f"torch.nn.{name}", cls))
    for name, value in context.items():  # the problem's own classes (Model, helpers)
        if isinstance(value, type):
            targets.append((name, value))
    targets.append(("<reference model instance>", original_model))
    return targets


def _is_patchable(value):
    return callable(value) or isinstance(value, (staticmethod, classmethod, property))


def take_patch_snapshot(context, original_model):
    """What patched_names compares against: each target's callables, and for classes and the
    reference instance also the set of names (a new forward or __call__ shadows an inherited one;
    modules gain attributes legitimately when torch imports submodules lazily)."""
    snap = []
    for tname, obj in _patch_targets(context, original_model):
        try:
            attrs = vars(obj)
        except TypeError:
            continue
        entries = {attr: value for attr, value in list(attrs.items()) if _is_patchable(value)}
        names = None if isinstance(obj, types.ModuleType) else set(attrs.keys())
        snap.append((tname, obj, entries, names))
    return snap


def patched_names(snapshot):
    changed = []
    for tname, obj, entries, names in snapshot:
        attrs = vars(obj)
        changed += [f"{tname}.{a}" for a, v in entries.items() if attrs.get(a, _MISSING) is not v]
        if names is not None:
            changed += [f"{tname}.{a}" for a in set(attrs.keys()) - names if _is_patchable(attrs[a])]
    return sorted(changed)


_MISSING = object()
