"""Plug the farm's tuned kernels into a running model, falling back to PyTorch's op elsewhere.

The kernels come from libautokernel_ops.so (models/plug/ops.cc): torch.ops.autokernel.load(manifest)
loads one tuned kernel per (kernel type, shape, dtype) and torch.ops.autokernel.call(i, inputs)
runs entry i exactly as the sandbox verified and timed it. Plug.install() replaces, for the
duration of a `with` block, the functions through which models reach the covered ops:

  torch.nn.functional.linear (nn.Linear)              -> matmul [M, N, K] (the weight transposed
                                                          once and cached; a bias added after)
  torch.matmul, torch.mm, Tensor.matmul, Tensor.__matmul__, for [..., K] @ [K, N]
                                                       -> matmul
  torch.nn.functional.softmax, torch.softmax, Tensor.softmax over the last dimension
                                                       -> softmax [rows, cols]
  torch.nn.functional.layer_norm (nn.LayerNorm) over the last dimension with weight, bias and
  eps 1e-5, 1e-12 or 1e-6                              -> layernorm, layernorm_e12, layernorm_e6
                                                          [rows, cols]
  torch.nn.functional.rms_norm (nn.RMSNorm) over the last dimension with a weight and eps 1e-6
  or 1e-5                                              -> rmsnorm, rmsnorm_e5 [rows, cols]
  torch.nn.functional.scaled_dot_product_attention without a mask or dropout, default scale,
  q, k and v of one shape                             -> flash_attention(_causal) [B, H, S, D]
  torch.sum, Tensor.sum, torch.amax, Tensor.amax over the last dimension alone, without a dtype
                                                       -> reduce, reduce_max [rows, cols]
  torch.nn.functional.cross_entropy over [N, C] logits and [N] targets, reduction "none", no
  weight, no label smoothing, no target outside [0, C) (checked on the host)
                                                       -> cross_entropy [N, C]
  apply_rotary_pos_emb(q, k, cos, sin) of the model's own Python modules (Hugging Face's LLaMA
  family, models/examples/llama.py): q or k [B, H, S, D] with cos and sin [S, D] or [B, S, D]
  (unsqueeze_dim 1) holding the same half twice, as rotate-half models build them
                                                       -> rotary_embedding [B * S, H, D]
  the forward of an MLP module of three bias-free Linears, down(silu(gate(x)) * up(x)): named
  gate/up/down, gate_proj/up_proj/down_proj or w1/w3/w2, with a SiLU act_fn or the class attribute
  ak_fused_mlp = "swiglu"                             -> fused_mlp [M, H, F]

The last two need the model (attach()); the rotary embedding's tables are taken as holding the same
half twice without a check on the device (that would stop a CUDA graph's capture): a model that
builds them otherwise gets wrong outputs, which the verify's output check reports.

A call is replaced only when a tuned kernel exists for its exact shape and dtype and its
arguments mean what the kernel computes (an eps the kernel does not use, a mask, grouped-query
attention: PyTorch's op runs). Every replaced call and every fallback of a covered function is
counted, so the report says what ran where. Python-level replacement (not a dispatcher override)
keeps the cost of a call that is not replaced near zero; a model that calls aten ops directly is
not covered. Only the functions of kernel types the manifest holds are wrapped (BERT on the H100,
2026-12-06: with only its layer norms tuned, wrapping every function put about 60 fallback calls a
forward through Python and made the tuned forward 0.757x of eager in wall time while its device
time was 1.066x).
"""
import json
import math
from collections import Counter

import torch
import torch.nn as nn
import torch.nn.functional as F

from classify import NORM_TYPES, family_of, norm_type  # the norm kernel types by the eps they compute with

_DTYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def _eps_list(family):
    """The eps values the kernel types of a norm family compute with: "1e-06 or 1e-05"."""
    return " or ".join(f"{eps:g}" for eps in NORM_TYPES[family])


class Plug:
    def __init__(self, manifest_path, lib_path):
        torch.ops.load_library(lib_path)
        with open(manifest_path) as f:
            manifest = json.load(f)
        first = int(torch.ops.autokernel.loaded())
        n = int(torch.ops.autokernel.load(manifest_path))
        self.entries = manifest.get("entries", [])
        if n != len(self.entries):
            raise RuntimeError(f"{manifest_path}: loaded {n} kernels of {len(self.entries)}")
        self._families = {family_of(e["kernel_type"]) for e in self.entries}
        self.index = {}
        for i, e in enumerate(self.entries):
            self.index[(e["kernel_type"], tuple(e["shape"]), e["dtype"])] = first + i
        self.replaced = Counter()   # (function, kernel_type, shape, dtype) -> calls
        self._fallbacks = Counter()  # (function, reason) -> calls
        self._misses = Counter()     # (function, kernel_type, shape, dtype name) -> calls; see fallbacks
        self._norm_misses = Counter()  # (function, norm family, eps) -> calls of a norm no type computes
        self._weights_t = {}        # id(weight) -> (weight, its version, weight.t().contiguous())
        self._saved = []
        self._model = None
        self._patched_modules = []  # modules whose forward is an instance attribute while installed

    def attach(self, model):
        """The model whose MLP modules and rotary functions are plugged too (see the module's doc)."""
        self._model = model
        return self

    # ---- lookup ----

    # Every covered call passes here, replaced or not: nothing is formatted per call (a miss is
    # counted by its key and worded when the counts are read).
    def _find(self, fn, kernel_type, shape, dtype):
        name = _DTYPES.get(dtype)
        i = self.index.get((kernel_type, shape, name)) if name else None
        if i is None:
            self._misses[(fn, kernel_type, shape, name or str(dtype))] += 1
        return i

    def _call(self, fn, i, kernel_type, shape, dtype, inputs):
        self.replaced[(fn, kernel_type, shape, _DTYPES[dtype])] += 1
        return torch.ops.autokernel.call(i, inputs)

    def _fallback(self, fn, reason):
        self._fallbacks[(fn, reason)] += 1

    @property
    def fallbacks(self):
        """(function, reason) -> calls that ran PyTorch's op."""
        out = Counter(self._fallbacks)
        for (fn, kernel_type, shape, name), n in self._misses.items():
            out[(fn, f"no tuned {kernel_type} for {list(shape)} {name}")] += n
        for (fn, family, eps), n in self._norm_misses.items():
            takes = "weight, bias" if family == "layernorm" else "a weight"
            out[(fn, f"not a last-dimension norm with {takes} and an eps of {_eps_list(family)} (eps {eps})")] += n
        return out

    def _weight_t(self, w):
        hit = self._weights_t.get(id(w))
        if hit is not None and hit[0] is w and hit[1] == w._version:
            return hit[2]
        wt = w.t().contiguous()
        self._weights_t[id(w)] = (w, w._version, wt)
        return wt

    # ---- the replacements ----

    def _matmul_2d(self, fn, a, b_dtype, k, n, contiguous_b):
        """a [..., K] @ b [K, N] (b of dtype b_dtype) through the tuned matmul, or None to fall back.
        contiguous_b() gives b as the kernel takes it (row-major [K, N]); it is called only when a
        tuned kernel exists, so a call that is not replaced makes no tensor."""
        if a.dtype not in _DTYPES or b_dtype != a.dtype or a.dim() < 1:
            return None
        if a.shape[-1] != k or a.numel() == 0:
            return None
        m = a.numel() // k
        i = self._find(fn, "matmul", (m, n, k), a.dtype)
        if i is None:
            return None
        out = self._call(fn, i, "matmul", (m, n, k), a.dtype, [a.reshape(m, k).contiguous(), contiguous_b()])
        return out.reshape(*a.shape[:-1], n)

    def _linear(self, orig):
        def linear(input, weight, bias=None):
            if isinstance(input, torch.Tensor) and isinstance(weight, torch.Tensor) and weight.dim() == 2 \
                    and not torch.is_grad_enabled():
                n, k = weight.shape
                y = self._matmul_2d("F.linear", input, weight.dtype, k, n, lambda: self._weight_t(weight))
                if y is not None:
                    return y if bias is None else y.add_(bias)
            return orig(input, weight, bias)
        return linear

    def _matmul(self, name, orig):
        def matmul(a, b, *args, **kwargs):
            if not args and not kwargs and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) \
                    and b.dim() == 2 and not torch.is_grad_enabled():
                k, n = b.shape
                y = self._matmul_2d(name, a, b.dtype, k, n, b.contiguous)
                if y is not None:
                    return y
            return orig(a, b, *args, **kwargs)
        return matmul

    def _softmax(self, name, orig):
        def softmax(input, dim=None, *args, **kwargs):
            dtype = kwargs.get("dtype") or next((a for a in args if isinstance(a, torch.dtype)), None)
            if isinstance(input, torch.Tensor) and dim is not None and dtype is None and input.dim() >= 1 \
                    and dim in (-1, input.dim() - 1) and input.numel() > 0:
                cols = input.shape[-1]
                rows = input.numel() // cols
                i = self._find(name, "softmax", (rows, cols), input.dtype)
                if i is not None:
                    x = input.reshape(rows, cols).contiguous()
                    return self._call(name, i, "softmax", (rows, cols), input.dtype, [x]).reshape(input.shape)
            elif isinstance(input, torch.Tensor):
                self._fallback(name, "not over the last dimension, or with a dtype")
            return orig(input, dim, *args, **kwargs)
        return softmax

    def _layer_norm(self, orig):
        def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
            shape = tuple(normalized_shape) if not isinstance(normalized_shape, int) else (normalized_shape,)
            kernel_type = norm_type("layernorm", eps)
            if len(shape) == 1 and weight is not None and bias is not None and kernel_type \
                    and input.shape[-1:] == shape and weight.dtype == input.dtype and bias.dtype == input.dtype:
                cols = shape[0]
                rows = input.numel() // cols
                i = self._find("F.layer_norm", kernel_type, (rows, cols), input.dtype)
                if i is not None:
                    x = input.reshape(rows, cols).contiguous()
                    out = self._call("F.layer_norm", i, kernel_type, (rows, cols), input.dtype,
                                     [x, weight.contiguous(), bias.contiguous()])
                    return out.reshape(input.shape)
            else:
                self._norm_misses[("F.layer_norm", "layernorm", eps)] += 1
            return orig(input, normalized_shape, weight, bias, eps)
        return layer_norm

    def _rms_norm(self, orig):
        def rms_norm(input, normalized_shape, weight=None, eps=None):
            shape = tuple(normalized_shape) if not isinstance(normalized_shape, int) else (normalized_shape,)
            kernel_type = norm_type("rmsnorm", eps)
            if len(shape) == 1 and weight is not None and kernel_type and input.shape[-1:] == shape \
                    and weight.dtype == input.dtype:
                cols = shape[0]
                rows = input.numel() // cols
                i = self._find("F.rms_norm", kernel_type, (rows, cols), input.dtype)
                if i is not None:
                    x = input.reshape(rows, cols).contiguous()
                    out = self._call("F.rms_norm", i, kernel_type, (rows, cols), input.dtype, [x, weight.contiguous()])
                    return out.reshape(input.shape)
            else:
                self._norm_misses[("F.rms_norm", "rmsnorm", eps)] += 1
            return orig(input, normalized_shape, weight, eps)
        return rms_norm

    def _sdpa(self, orig):
        def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False,
                 **kwargs):
            ok = (attn_mask is None and dropout_p == 0.0 and not kwargs and query.dim() == 4
                  and query.shape == key.shape == value.shape and query.dtype == key.dtype == value.dtype
                  and (scale is None or abs(scale - 1 / math.sqrt(query.shape[-1])) <= 1e-9))
            if ok:
                kt = "flash_attention_causal" if is_causal else "flash_attention"
                shape = tuple(query.shape)
                i = self._find("F.scaled_dot_product_attention", kt, shape, query.dtype)
                if i is not None:
                    return self._call("F.scaled_dot_product_attention", i, kt, shape, query.dtype,
                                      [query.contiguous(), key.contiguous(), value.contiguous()])
            else:
                self._fallback("F.scaled_dot_product_attention",
                               "a mask, dropout, another scale, or q, k, v of different shapes (grouped-query)")
            return orig(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                        scale=scale, enable_gqa=enable_gqa, **kwargs)
        return sdpa


    def _reduce(self, name, kernel_type, orig):
        def reduce(input, *args, **kwargs):
            dim = args[0] if args else kwargs.get("dim")
            keepdim = args[1] if len(args) > 1 else kwargs.get("keepdim", False)
            dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
            if isinstance(input, torch.Tensor) and len(args) <= 2 and set(kwargs) <= {"dim", "keepdim"} \
                    and len(dims) == 1 and isinstance(dims[0], int) and input.dim() >= 1 and input.numel() > 0 \
                    and dims[0] in (-1, input.dim() - 1) and isinstance(keepdim, bool):
                cols = input.shape[-1]
                rows = input.numel() // cols
                i = self._find(name, kernel_type, (rows, cols), input.dtype)
                if i is not None:
                    out = self._call(name, i, kernel_type, (rows, cols), input.dtype,
                                     [input.reshape(rows, cols).contiguous()])
                    return out.reshape(tuple(input.shape[:-1]) + ((1,) if keepdim else ()))
            return orig(input, *args, **kwargs)
        return reduce

    def _cross_entropy(self, orig):
        def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                          reduction="mean", label_smoothing=0.0):
            if isinstance(input, torch.Tensor) and isinstance(target, torch.Tensor) and input.dim() == 2 \
                    and target.dim() == 1 and target.dtype == torch.int64 and weight is None and size_average is None \
                    and reduce is None and reduction == "none" and label_smoothing == 0.0 \
                    and target.shape[0] == input.shape[0] and input.numel() > 0:
                n, c = input.shape
                i = self._find("F.cross_entropy", "cross_entropy", (n, c), input.dtype)
                # The kernel takes every target as a class: an ignored or out-of-range one runs PyTorch's op.
                if i is not None and bool(((target >= 0) & (target < c)).all()):
                    return self._call("F.cross_entropy", i, "cross_entropy", (n, c), input.dtype,
                                      [input.contiguous(), target.contiguous()])
                if i is not None:
                    self._fallback("F.cross_entropy", "a target outside [0, C) (ignore_index)")
            elif isinstance(input, torch.Tensor):
                self._fallback("F.cross_entropy", "not [N, C] logits with reduction 'none', no weight or smoothing")
            return orig(input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
        return cross_entropy

    def _rope_one(self, x, cos, sin, unsqueeze_dim):
        """x [B, H, S, D] through the tuned rotary_embedding kernel, or None."""
        if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[-1] % 2 or x.dtype not in _DTYPES \
                or cos.dtype != x.dtype or sin.dtype != x.dtype or cos.shape != sin.shape:
            return None
        b, h, s, d = x.shape
        if cos.dim() == 2 and tuple(cos.shape) == (s, d):
            c, sn = cos.unsqueeze(0).expand(b, s, d), sin.unsqueeze(0).expand(b, s, d)
        elif cos.dim() == 3 and unsqueeze_dim == 1 and tuple(cos.shape[1:]) == (s, d) and cos.shape[0] in (1, b):
            c, sn = cos.expand(b, s, d), sin.expand(b, s, d)
        else:
            self._fallback("apply_rotary_pos_emb", "tables that are not [S, D] or [B, S, D] with unsqueeze_dim 1")
            return None
        shape = (b * s, h, d)
        i = self._find("apply_rotary_pos_emb", "rotary_embedding", shape, x.dtype)
        if i is None:
            return None
        half = d // 2
        xt = x.transpose(1, 2).reshape(b * s, h, d).contiguous()  # a view where x is [B, S, H, D] transposed
        out = self._call("apply_rotary_pos_emb", i, "rotary_embedding", shape, x.dtype,
                         [xt, c[..., :half].reshape(b * s, half).contiguous(),
                          sn[..., :half].reshape(b * s, half).contiguous()])
        return out.view(b, s, h, d).transpose(1, 2)

    def _rotary(self, orig):
        def apply_rotary_pos_emb(q, k, cos, sin, *args, **kwargs):
            unsqueeze_dim = kwargs.get("unsqueeze_dim", args[1] if len(args) > 1 else 1)
            position_ids = kwargs.get("position_ids", args[0] if args else None)
            got = [None, None]
            if position_ids is None and not torch.is_grad_enabled() and isinstance(cos, torch.Tensor):
                got = [self._rope_one(t, cos, sin, unsqueeze_dim) for t in (q, k)]
            if got[0] is not None and got[1] is not None:
                return got[0], got[1]
            if got[0] is None and got[1] is None:
                return orig(q, k, cos, sin, *args, **kwargs)
            # One tensor left to the original: paired with itself when that is less work than
            # with the other (a grouped-query key is a fraction of its query). The original is
            # taken to treat q and k alike and out of place, as Hugging Face's does.
            x, other = (q, k) if got[0] is None else (k, q)
            pair = (x, x) if x.numel() <= other.numel() else (q, k)
            done = orig(*pair, cos, sin, *args, **kwargs)
            left = done[0] if pair[0] is x else done[1]
            return (left, got[1]) if got[0] is None else (got[0], left)
        return apply_rotary_pos_emb

    def _mlp_forward(self, module, parts, orig):
        gate, up, down = parts

        def forward(x, *args, **kwargs):
            if not args and not kwargs and isinstance(x, torch.Tensor) and not torch.is_grad_enabled() \
                    and x.dim() >= 1 and x.numel() > 0 and x.dtype in _DTYPES \
                    and gate.weight.dtype == up.weight.dtype == down.weight.dtype == x.dtype:
                hidden, inner = gate.in_features, gate.out_features
                m = x.numel() // hidden
                i = self._find("MLP.forward", "fused_mlp", (m, hidden, inner), x.dtype)
                if i is not None:
                    out = self._call("MLP.forward", i, "fused_mlp", (m, hidden, inner), x.dtype,
                                     [x.reshape(m, hidden).contiguous(), self._weight_t(gate.weight),
                                      self._weight_t(up.weight), self._weight_t(down.weight)])
                    return out.reshape(x.shape)
            return orig(x, *args, **kwargs)
        return forward

    # ---- install / remove ----

    def _set(self, owner, name, make):
        orig = getattr(owner, name)
        self._saved.append((owner, name, orig))
        setattr(owner, name, make(orig))

    def _serves(self, *families):
        """True when the manifest holds a kernel of one of these families (a norm's eps types, such
        as layernorm_e12, belong to their norm's family)."""
        return not self._families.isdisjoint(families)

    def __enter__(self):
        # Only the functions some kernel of the manifest can replace are wrapped: a wrapper that can
        # only fall back costs every call its Python and replaces nothing.
        if self._serves("matmul"):
            self._set(F, "linear", self._linear)
            self._set(torch, "matmul", lambda o: self._matmul("torch.matmul", o))
            self._set(torch, "mm", lambda o: self._matmul("torch.mm", o))
            self._set(torch.Tensor, "matmul", lambda o: self._matmul("Tensor.matmul", o))
            self._set(torch.Tensor, "__matmul__", lambda o: self._matmul("Tensor.__matmul__", o))
        if self._serves("softmax"):
            self._set(F, "softmax", lambda o: self._softmax("F.softmax", o))
            self._set(torch, "softmax", lambda o: self._softmax("torch.softmax", o))
            self._set(torch.Tensor, "softmax", lambda o: self._softmax("Tensor.softmax", o))
        if self._serves("layernorm"):
            self._set(F, "layer_norm", self._layer_norm)
        if self._serves("rmsnorm"):
            self._set(F, "rms_norm", self._rms_norm)
        if self._serves("flash_attention", "flash_attention_causal"):
            self._set(F, "scaled_dot_product_attention", self._sdpa)
        if self._serves("reduce"):
            self._set(torch, "sum", lambda o: self._reduce("torch.sum", "reduce", o))
            self._set(torch.Tensor, "sum", lambda o: self._reduce("Tensor.sum", "reduce", o))
        if self._serves("reduce_max"):
            self._set(torch, "amax", lambda o: self._reduce("torch.amax", "reduce_max", o))
            self._set(torch.Tensor, "amax", lambda o: self._reduce("Tensor.amax", "reduce_max", o))
        if self._serves("cross_entropy"):
            self._set(F, "cross_entropy", self._cross_entropy)
        if self._model is not None:
            if self._serves("rotary_embedding"):
                for g in _model_globals(self._model):
                    orig = g.get("apply_rotary_pos_emb")
                    if callable(orig):
                        self._saved.append((g, "apply_rotary_pos_emb", orig))
                        g["apply_rotary_pos_emb"] = self._rotary(orig)
            if self._serves("fused_mlp"):
                for m in self._model.modules():
                    parts = _swiglu_parts(m)
                    if parts is not None:
                        m.forward = self._mlp_forward(m, parts, m.forward)
                        self._patched_modules.append(m)
        return self

    def __exit__(self, *exc):
        while self._patched_modules:
            del self._patched_modules.pop().forward  # back to the class's forward
        while self._saved:
            owner, name, orig = self._saved.pop()
            if isinstance(owner, dict):  # a model module's globals
                owner[name] = orig
            else:
                setattr(owner, name, orig)
        return False

    def reset_counts(self):
        self.replaced.clear()
        self._fallbacks.clear()
        self._misses.clear()
        self._norm_misses.clear()


def _model_globals(model):
    """The global namespaces of the Python modules whose code the model's submodules run (where a
    model's own functions, such as apply_rotary_pos_emb, live), each once; torch's own excluded."""
    seen = {}
    for m in model.modules():
        fwd = getattr(type(m), "forward", None)
        g = getattr(fwd, "__globals__", None)
        if isinstance(g, dict) and not str(g.get("__name__", "")).startswith("torch."):
            seen[id(g)] = g
    return list(seen.values())


def _swiglu_parts(m):
    """(gate, up, down) of an MLP module computing down(silu(gate(x)) * up(x)), or None."""
    for names in (("gate", "up", "down"), ("gate_proj", "up_proj", "down_proj"), ("w1", "w3", "w2")):
        parts = [getattr(m, n, None) for n in names]
        if not all(isinstance(p, nn.Linear) and p.bias is None for p in parts):
            continue
        act = getattr(m, "act_fn", None)
        if getattr(type(m), "ak_fused_mlp", None) == "swiglu" or isinstance(act, nn.SiLU):
            if parts[0].in_features == parts[1].in_features == parts[2].out_features \
                    and parts[0].out_features == parts[1].out_features == parts[2].in_features:
                return tuple(parts)
    return None
