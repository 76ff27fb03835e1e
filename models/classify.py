"""Classification of profiled ATen ops into the farm's kernel types (kernels/<type>/spec.cc).

classify(name, shapes, concrete) -> (kernel_type, shape, layout) or None, where shape is the type's
shape (kernels/README.md: softmax/reduce/rmsnorm/layernorm/cross_entropy [rows, cols], matmul
[M, N, K], flash_attention [B, H, S, D], rotary_embedding [tokens, heads, dim], fused_mlp
[M, H, F]) and layout holds what the shape does not say (batch of a bmm, KV heads, the key length,
an attention mask, a norm's eps that no type of its family computes with, a missing weight or
bias). A norm's type follows its eps (NORM_TYPES: BERT's eps 1e-12 is layernorm_e12). An op whose
arguments do not fit its type's shape (a softmax over a middle dimension, a reduction over
several) is None: its time is "other", never a wrong target.

Regions marked torch.profiler.record_function("ak::<type>") in a model are hints (HINTS) for the
types no single ATen op implements (rotary_embedding, fused_mlp); their shape is read from the
first op inside the region (hint_shape), and for the rotary embedding the heads from the op that
did the work, so a query and a key of different heads are two targets.
"""
import math

DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}
HINTS = ("rotary_embedding", "fused_mlp")


def _prod(xs):
    return int(math.prod(xs)) if xs else 1


def _arg(concrete, i, default=None):
    """A scalar argument recorded by the profiler (an int, bool or float, or its text)."""
    if concrete is None or i >= len(concrete):
        return default
    v = concrete[i]
    if v is None or v == "" or v == []:
        return default
    if isinstance(v, str):
        s = v.strip()
        if s in ("True", "true"):
            return True
        if s in ("False", "false"):
            return False
        try:
            return int(s)
        except ValueError:
            try:
                return float(s)
            except ValueError:
                return default
    return v


def _last_dim(dim, ndim):
    return dim is not None and not isinstance(dim, bool) and isinstance(dim, int) and dim in (-1, ndim - 1)


def _rows_cols(x):
    return [_prod(x[:-1]), x[-1]] if x else None


def _matmul(name, s):
    if name == "aten::linear" and len(s) >= 2 and len(s[0]) >= 1 and len(s[1]) == 2:
        return [_prod(s[0][:-1]), s[1][0], s[1][1]], {}
    if name == "aten::addmm" and len(s) >= 3 and len(s[1]) == 2 and len(s[2]) == 2:
        return [s[1][0], s[2][1], s[1][1]], {}
    if name == "aten::mm" and len(s) >= 2 and len(s[0]) == 2 and len(s[1]) == 2:
        return [s[0][0], s[1][1], s[0][1]], {}
    if name in ("aten::bmm", "aten::baddbmm"):
        a, b = (s[0], s[1]) if name == "aten::bmm" else (s[1], s[2])
        if len(a) == 3 and len(b) == 3:
            return [a[1], b[2], a[2]], {"batch": a[0]}
    if name == "aten::matmul" and len(s) >= 2 and len(s[0]) >= 2 and len(s[1]) >= 2:
        a, b = s[0], s[1]
        if len(b) == 2:
            return [_prod(a[:-1]), b[1], b[0]], {}
        batch = _prod(a[:-2])
        return [a[-2], b[-1], a[-1]], ({"batch": batch} if batch > 1 else {})
    return None


# (op name, index of is_causal among its arguments)
_ATTENTION = {
    "aten::scaled_dot_product_attention": 5,
    "aten::_scaled_dot_product_flash_attention": 4,
    "aten::_scaled_dot_product_efficient_attention": 6,
    "aten::_scaled_dot_product_cudnn_attention": 6,
    "aten::_scaled_dot_product_attention_math": 5,
    "aten::_scaled_dot_product_flash_attention_for_cpu": 4,
}
_ATTN_MASK = {"aten::scaled_dot_product_attention": 3, "aten::_scaled_dot_product_efficient_attention": 3,
              "aten::_scaled_dot_product_cudnn_attention": 3, "aten::_scaled_dot_product_attention_math": 3}


# The norm kernel types by the eps they compute with (kernels/<type>/spec.cc; an eps is a constant
# of a starter, so each eps in use is a type of its own), and the arguments their kernels take.
NORM_TYPES = {
    "layernorm": {1e-5: "layernorm", 1e-12: "layernorm_e12", 1e-6: "layernorm_e6"},
    "rmsnorm": {1e-6: "rmsnorm", 1e-5: "rmsnorm_e5"},
}
NORM_FAMILY = {t: family for family, types in NORM_TYPES.items() for t in types.values()}


def family_of(kernel_type):
    """The kernel type a norm's eps type belongs to (layernorm_e12 -> layernorm); others as given."""
    return NORM_FAMILY.get(kernel_type, kernel_type)

_NORM_AFFINE = {"layernorm": ("weight", "bias"), "rmsnorm": ("weight",)}


def norm_type(family, eps):
    """The kernel type of a `family` norm ("layernorm", "rmsnorm") computing with eps, or None."""
    if eps is None or isinstance(eps, bool):
        return None
    for want, t in NORM_TYPES[family].items():
        if abs(float(eps) - want) <= 1e-3 * want:
            return t
    return None


def _norm(family, s, concrete, eps_index):
    """The kernel type of a norm call (by its eps) and what the call differs in from every type of
    its family: an eps no type computes with ("default" for rms_norm's eps=None, which is the
    dtype's machine epsilon), or a missing weight or bias. The layout is empty when the type
    computes exactly this call; the eps is read only where the profiler recorded the arguments
    (else the family's first type)."""
    kernel_type, layout = family, {}
    if concrete is not None:
        eps = _arg(concrete, eps_index)
        kernel_type = norm_type(family, eps) or family
        if eps is None or isinstance(eps, bool):
            layout["eps"] = "default"
        elif norm_type(family, eps) is None:
            layout["eps"] = float(eps)
    for i, arg in enumerate(_NORM_AFFINE[family]):
        if not (len(s) > 2 + i and s[2 + i]):
            layout[arg] = False
    return kernel_type, layout


def classify(name, shapes, concrete):
    s = [list(x) if isinstance(x, (list, tuple)) else [] for x in (shapes or [])]
    x = s[0] if s else []
    mm = _matmul(name, s)
    if mm:
        return "matmul", mm[0], mm[1]
    if name in _ATTENTION and len(s) >= 3 and len(s[0]) == 4 and len(s[1]) == 4:
        q, k = s[0], s[1]
        causal = bool(_arg(concrete, _ATTENTION[name], False))
        layout = {}
        if k[1] != q[1]:
            layout["kv_heads"] = k[1]
        if k[2] != q[2]:
            layout["kv_seq"] = k[2]
        m = _ATTN_MASK.get(name)
        if m is not None and len(s) > m and s[m]:
            layout["mask"] = True
        return ("flash_attention_causal" if causal else "flash_attention"), list(q), layout
    if name in ("aten::softmax", "aten::_softmax") and x and _last_dim(_arg(concrete, 1), len(x)):
        return "softmax", _rows_cols(x), {}
    if name == "aten::cross_entropy_loss" and len(s) >= 2 and len(x) == 2 and len(s[1]) == 1:
        return "cross_entropy", list(x), {}
    if name in ("aten::layer_norm", "aten::native_layer_norm") and x:
        cols = s[2][0] if len(s) > 2 and len(s[2]) == 1 else x[-1]
        if cols == x[-1]:
            kernel_type, layout = _norm("layernorm", s, concrete, 4)
            return kernel_type, _rows_cols(x), layout
    if name in ("aten::rms_norm", "aten::_fused_rms_norm") and x:
        cols = s[2][0] if len(s) > 2 and len(s[2]) == 1 else x[-1]
        if cols == x[-1]:
            kernel_type, layout = _norm("rmsnorm", s, concrete, 3)
            return kernel_type, _rows_cols(x), layout
    if name in ("aten::sum", "aten::amax", "aten::max") and len(x) >= 1 and concrete is not None:
        dims = concrete[1] if len(concrete) > 1 else None
        if isinstance(dims, (list, tuple)) and len(dims) == 1:
            dims = dims[0]
        dim = _arg([dims], 0)
        if _last_dim(dim, len(x)):
            return ("reduce" if name == "aten::sum" else "reduce_max"), _rows_cols(x), {}
    return None


def tensors_4d(shapes):
    """The 4-d shapes among an op's recorded input shapes (a list's too, where it was recorded)."""
    out = []
    for x in shapes or []:
        if isinstance(x, (list, tuple)) and x:
            if all(isinstance(v, int) for v in x):
                if len(x) == 4:
                    out.append(list(x))
            elif isinstance(x[0], (list, tuple)):
                out += tensors_4d(x)
    return out


def hint_shape(kernel_type, first_shapes, launcher_shapes=None):
    """The shape of a hinted region from its first op's input shapes, or None. launcher_shapes,
    the input shapes of the op in the region that did the work being credited, tells the rotary
    embedding's query from its key: they differ in heads under grouped-query attention."""
    s = [list(x) for x in (first_shapes or []) if isinstance(x, (list, tuple))]
    if kernel_type == "rotary_embedding" and s and len(s[0]) == 4:
        b, h, t, d = s[0]  # q or k as [batch, heads, seq, head_dim]
        # the tensor's heads, not its tables' (cos [B or 1, 1, S, D] broadcast against it); its
        # last dim may be a half (rotate_half)
        heads = [x[1] for x in tensors_4d(launcher_shapes) if x[0] in (b, 1) and x[2] == t]
        if heads:
            h = max(heads)
        return [b * t, h, d]
    if kernel_type == "fused_mlp" and len(s) >= 2 and len(s[0]) >= 1 and len(s[1]) == 2:
        return [_prod(s[0][:-1]), s[0][-1], s[1][0]]  # x [..., H], gate weight [F, H]
    return None


def flops_bytes(kernel_type, shape, dtype):
    """(flops, bytes) of one call, by the formulas of kernels/<type>/spec.cc; None if unknown."""
    e = DTYPE_BYTES.get(dtype)
    if e is None or not shape:
        return None
    kernel_type = family_of(kernel_type)
    if kernel_type in ("softmax", "reduce", "reduce_max", "rmsnorm", "layernorm", "cross_entropy"):
        r, c = shape
        return {
            "softmax": (5.0 * r * c, 2.0 * r * c * e),
            "reduce": (1.0 * r * c, (r * c + r) * e),
            "reduce_max": (1.0 * r * c, (r * c + r) * e),
            "rmsnorm": (4.0 * r * c, (2.0 * r + 1) * c * e),
            "layernorm": (8.0 * r * c, (2.0 * r + 2) * c * e),
            "cross_entropy": (4.0 * r * c, r * (c * e + 8.0 + e)),
        }[kernel_type]
    if kernel_type == "matmul":
        m, n, k = shape
        return 2.0 * m * n * k, (m * k + k * n + m * n) * e
    if kernel_type in ("flash_attention", "flash_attention_causal"):
        b, h, sq, d = shape
        scores = float(b) * h * sq * sq
        f = (4.0 if kernel_type == "flash_attention" else 2.0) * scores * d
        return f, 4.0 * b * h * sq * d * e
    if kernel_type == "rotary_embedding":
        t, h, d = shape
        return 3.0 * t * h * d, (2.0 * t * h * d + t * d) * e
    if kernel_type == "fused_mlp":
        m, h, f = shape
        return 6.0 * m * h * f, (2.0 * m * h + 3.0 * h * f) * e
    return None
