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
    """The output of each operator from its inputs' shapes alone (torch.library.register_fake), for
    torch.compile and the meta device. Once per process: a second import of the package (under
    another module name) finds them registered."""
    def like_first(x, *rest, **kw):
        return torch.empty_like(x)

    def per_row(x, *rest):
        return x.new_empty(x.shape[:1])

    fakes = {
        "softmax": like_first, "layernorm": like_first, "rmsnorm": like_first, "rotary_embedding": like_first,
        "flash_attention": like_first, "flash_attention_causal": like_first,
        "reduce": per_row, "reduce_max": per_row, "cross_entropy": per_row,
        "matmul": lambda a, b: a.new_empty((a.shape[0], b.shape[1])),
        "fused_mlp": lambda x, w_gate, w_up, w_down: x.new_empty((x.shape[0], w_down.shape[1])),
    }
    for name, fake in fakes.items():
        try:
            torch.library.register_fake(f"{NAMESPACE}::{name}")(fake)
        except RuntimeError as e:
            if "already" not in str(e):
                raise


_register_fakes()
