"""The farm's tuned kernels as a Hugging Face Kernels package (written by `autokernel export --hf`).

Each function runs a kernel that the farm tuned, verified against PyTorch and timed for one exact
shape and dtype (ENTRIES lists them) when its inputs have that shape and dtype on a CUDA device, and
PyTorch's own op otherwise. Inputs of any leading shape are flattened to the rows the kernels take.

    softmax(x)                         over the last dimension
    layer_norm(x, weight, bias)        over the last dimension, eps 1e-5
    rms_norm(x, weight)                over the last dimension, eps 1e-6
    matmul(a, b)                       a [..., K] @ b [K, N]
    scaled_dot_product_attention(q, k, v, is_causal=False)   [B, H, S, D], no mask, default scale
    cross_entropy(logits, target)      per row, no reduction
    reduce_sum(x), reduce_max(x)       over the last dimension
    fused_mlp(x, w_gate, w_up, w_down) (silu(x @ w_gate) * (x @ w_up)) @ w_down, x [M, H]
    rotary_embedding(x, cos, sin)      x [tokens, heads, dim], tables [tokens, dim / 2]

tuned_calls() counts the calls each entry's kernel ran, fallback_calls() those PyTorch's op ran.
The operators themselves are torch.ops.<NAMESPACE>.<kernel type> (see torch_binding.cpp).
"""
from ._entries import ARCH, ENTRIES, GPU_MODEL, NAMESPACE
from ._ops import add_op_namespace_prefix, ops

__all__ = ["ARCH", "ENTRIES", "GPU_MODEL", "NAMESPACE", "ops", "add_op_namespace_prefix", "softmax", "layer_norm",
           "rms_norm", "matmul", "scaled_dot_product_attention", "cross_entropy", "reduce_sum", "reduce_max",
           "fused_mlp", "rotary_embedding", "tuned_calls", "fallback_calls"]


def _rows(x):
    return x.reshape(-1, x.shape[-1]).contiguous()


def softmax(x):
    return ops.softmax(_rows(x)).reshape(x.shape)


def layer_norm(x, weight, bias):
    return ops.layernorm(_rows(x), weight.contiguous(), bias.contiguous()).reshape(x.shape)


def rms_norm(x, weight):
    return ops.rmsnorm(_rows(x), weight.contiguous()).reshape(x.shape)


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
