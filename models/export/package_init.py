"""The farm's tuned kernels as a Hugging Face Kernels package (written by `autokernel export --hf`).

Each function runs a kernel that the farm tuned, verified against PyTorch and timed for one exact
shape and dtype (ENTRIES lists them) when its inputs have that shape and dtype on a CUDA device, and
PyTorch's own op otherwise. Inputs of any leading shape are flattened to the rows the kernels take.

    softmax(x)                         over the last dimension
    layer_norm(x, weight, bias, eps=1e-5)   over the last dimension (tuned: eps 1e-5, 1e-12, 1e-6)
    rms_norm(x, weight, eps=1e-6)      over the last dimension (tuned: eps 1e-6, 1e-5)
    matmul(a, b)                       a [..., K] @ b [K, N]
    scaled_dot_product_attention(q, k, v, is_causal=False)   [B, H, S, D], no mask, default scale
    cross_entropy(logits, target)      per row, no reduction
    reduce_sum(x), reduce_max(x)       over the last dimension
    fused_mlp(x, w_gate, w_up, w_down) (silu(x @ w_gate) * (x @ w_up)) @ w_down, x [M, H]
    rotary_embedding(x, cos, sin)      x [tokens, heads, dim], tables [tokens, dim / 2]

tuned_calls() counts the calls each entry's kernel ran, fallback_calls() those PyTorch's op ran.
The operators themselves are torch.ops.<NAMESPACE>.<kernel type> (see torch_binding.cpp). Each has a
fake implementation (its output's shape and dtype), so torch.compile traces a model that calls
them with the operators kept whole in its graph, and the tuned kernels run in the compiled model.
"""
import torch

from ._entries import ARCH, ENTRIES, GPU_MODEL, NAMESPACE
from ._ops import add_op_namespace_prefix, ops

__all__ = ["ARCH", "ENTRIES", "GPU_MODEL", "NAMESPACE", "ops", "add_op_namespace_prefix", "softmax", "layer_norm",
           "rms_norm", "matmul", "scaled_dot_product_attention", "cross_entropy", "reduce_sum", "reduce_max",
           "fused_mlp", "rotary_embedding", "tuned_calls", "fallback_calls"]


def _rows(x):
    return x.reshape(-1, x.shape[-1]).contiguous()


def softmax(x):
    return ops.softmax(_rows(x)).reshape(x.shape)


def layer_norm(x, weight, bias, eps=1e-5):
    return ops.layernorm(_rows(x), weight.contiguous(), bias.contiguous(), eps).reshape(x.shape)


def rms_norm(x, weight, eps=1e-6):
    return ops.rmsnorm(_rows(x), weight.contiguous(), eps).reshape(x.shape)


def matmul(a, b):
    out = ops.matmul(_rows(a), b.contiguous())
    return out.reshape(*a.shape[:-1], b.shape[-1])


def scaled_dot_product_attention(q, k, v, is_causal=False):
    op = ops.flash_attention_causal if is_causal else ops.flash_attention
    return op(q.contiguous(), k.contiguous(), v.contiguous())


def cross_entropy(logits, target):
    return ops.cross_entropy(_rows(logits), target.reshape(-1).contiguous()).reshape(logits.shape[:-1])


def reduce_sum(x):
    return ops.reduce(_rows(x)).reshape(x.shape[:-1])


def reduce_max(x):
    return ops.reduce_max(_rows(x)).reshape(x.shape[:-1])


def fused_mlp(x, w_gate, w_up, w_down):
    return ops.fused_mlp(x.contiguous(), w_gate.contiguous(), w_up.contiguous(), w_down.contiguous())


def rotary_embedding(x, cos, sin):
    return ops.rotary_embedding(x.contiguous(), cos.contiguous(), sin.contiguous())


def tuned_calls():
    """{"<kernel type> <shape> <dtype>": calls} for every entry."""
    counts = ops.tuned_calls()
    return {f"{e['kernel_type']} {'x'.join(str(d) for d in e['shape'])} {e['dtype']}": int(c)
            for e, c in zip(ENTRIES, counts)}


def fallback_calls():
    return int(ops.fallback_calls())


def _register_fakes():
    """Each operator's output from its inputs' metadata alone (torch.library.register_fake), for
    torch.compile and the meta device: PyTorch's op that the operator falls back to, run on the fake
    inputs, made contiguous as the operator's output always is (torch_binding.cpp). Once per
    process: a second import of the package (under another module name) finds them registered."""
    import torch.nn.functional as F

    def rotary(x, cos, sin):
        h = x.shape[2] // 2
        rotated = torch.cat((-x[..., h:], x[..., :h]), 2)
        return x * torch.cat((cos, cos), 1).unsqueeze(1) + rotated * torch.cat((sin, sin), 1).unsqueeze(1)

    fakes = {
        "softmax": lambda x: torch.softmax(x, 1),
        "reduce": lambda x: x.sum(1),
        "reduce_max": lambda x: x.amax(1),
        "layernorm": lambda x, w, b, eps=1e-5: F.layer_norm(x, (x.shape[1],), w, b, eps),
        "rmsnorm": lambda x, w, eps=1e-6: F.rms_norm(x, (x.shape[1],), w, eps),
        "cross_entropy": lambda logits, target: F.cross_entropy(logits, target, reduction="none"),
        "matmul": torch.mm,
        "flash_attention": F.scaled_dot_product_attention,
        "flash_attention_causal": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        "fused_mlp": lambda x, w_gate, w_up, w_down: torch.mm(F.silu(x @ w_gate) * (x @ w_up), w_down),
        "rotary_embedding": rotary,
    }
    for name, op in fakes.items():
        try:
            torch.library.register_fake(f"{NAMESPACE}::{name}")(
                lambda *args, _op=op, **kwargs: _op(*args, **kwargs).contiguous())
        except RuntimeError as e:
            if "already" not in str(e):
                raise


_register_fakes()
