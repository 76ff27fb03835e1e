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
  eps 1e-5                                             -> layernorm [rows, cols]
  torch.nn.functional.rms_norm (nn.RMSNorm) over the last dimension with a weight and eps 1e-6
                                                       -> rmsnorm [rows, cols]
  torch.nn.functional.scaled_dot_product_attention without a mask or dropout, default scale,
  q, k and v of one shape                             -> flash_attention(_causal) [B, H, S, D]

A call is replaced only when a tuned kernel exists for its exact shape and dtype and its
arguments mean what the kernel computes (an eps the kernel does not use, a mask, grouped-query
attention: PyTorch's op runs). Every replaced call and every fallback of a covered function is
counted, so the report says what ran where. Python-level replacement (not a dispatcher override)
keeps the cost of a call that is not replaced near zero; a model that calls aten ops directly is
not covered.
"""
import json
import math
from collections import Counter

import torch
import torch.nn.functional as F

_DTYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
LAYERNORM_EPS = 1e-5  # kernels/layernorm/spec.cc
RMSNORM_EPS = 1e-6    # kernels/rmsnorm/spec.cc


def _eps_is(eps, want):
    return eps is not None and abs(float(eps) - want) <= 1e-12


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
        self.index = {}
        for i, e in enumerate(self.entries):
            self.index[(e["kernel_type"], tuple(e["shape"]), e["dtype"])] = first + i
        self.replaced = Counter()   # (function, kernel_type, shape, dtype) -> calls
        self.fallbacks = Counter()  # (function, reason) -> calls
        self._weights_t = {}        # id(weight) -> (weight, its version, weight.t().contiguous())
        self._saved = []

    # ---- lookup ----

    def _find(self, fn, kernel_type, shape, dtype):
        name = _DTYPES.get(dtype)
        i = self.index.get((kernel_type, tuple(int(d) for d in shape), name)) if name else None
        if i is None:
            self.fallbacks[(fn, f"no tuned {kernel_type} for {list(shape)} {name or dtype}")] += 1
        return i

    def _call(self, fn, i, kernel_type, shape, dtype, inputs):
        self.replaced[(fn, kernel_type, tuple(int(d) for d in shape), _DTYPES[dtype])] += 1
        return torch.ops.autokernel.call(i, inputs)

    def _fallback(self, fn, reason):
        self.fallbacks[(fn, reason)] += 1

    def _weight_t(self, w):
        hit = self._weights_t.get(id(w))
        if hit is not None and hit[0] is w and hit[1] == w._version:
            return hit[2]
        wt = w.t().contiguous()
        self._weights_t[id(w)] = (w, w._version, wt)
        return wt

    # ---- the replacements ----

    def _matmul_2d(self, fn, a, b_kn, contiguous_b):
        """a [..., K] @ b [K, N] through the tuned matmul, or None to fall back. contiguous_b() gives b
        as the kernel takes it (row-major [K, N]); it is called only when a tuned kernel exists."""
        if a.dtype not in _DTYPES or b_kn.dtype != a.dtype or a.dim() < 1 or b_kn.dim() != 2:
            return None
        k, n = b_kn.shape
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
                y = self._matmul_2d("F.linear", input, weight.t(), lambda: self._weight_t(weight))
                if y is not None:
                    return y if bias is None else y.add_(bias)
            return orig(input, weight, bias)
        return linear

    def _matmul(self, name, orig):
        def matmul(a, b, *args, **kwargs):
            if not args and not kwargs and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) \
                    and b.dim() == 2 and not torch.is_grad_enabled():
                y = self._matmul_2d(name, a, b, b.contiguous)
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
            if len(shape) == 1 and weight is not None and bias is not None and _eps_is(eps, LAYERNORM_EPS) \
                    and input.shape[-1:] == shape and weight.dtype == input.dtype and bias.dtype == input.dtype:
                cols = shape[0]
                rows = input.numel() // cols
                i = self._find("F.layer_norm", "layernorm", (rows, cols), input.dtype)
                if i is not None:
                    x = input.reshape(rows, cols).contiguous()
                    out = self._call("F.layer_norm", i, "layernorm", (rows, cols), input.dtype,
                                     [x, weight.contiguous(), bias.contiguous()])
                    return out.reshape(input.shape)
            else:
                self._fallback("F.layer_norm", f"not a last-dimension norm with weight, bias and eps {LAYERNORM_EPS}")
            return orig(input, normalized_shape, weight, bias, eps)
        return layer_norm

    def _rms_norm(self, orig):
        def rms_norm(input, normalized_shape, weight=None, eps=None):
            shape = tuple(normalized_shape) if not isinstance(normalized_shape, int) else (normalized_shape,)
            if len(shape) == 1 and weight is not None and _eps_is(eps, RMSNORM_EPS) and input.shape[-1:] == shape \
                    and weight.dtype == input.dtype:
                cols = shape[0]
                rows = input.numel() // cols
                i = self._find("F.rms_norm", "rmsnorm", (rows, cols), input.dtype)
                if i is not None:
                    x = input.reshape(rows, cols).contiguous()
                    out = self._call("F.rms_norm", i, "rmsnorm", (rows, cols), input.dtype, [x, weight.contiguous()])
                    return out.reshape(input.shape)
            else:
                self._fallback("F.rms_norm", f"not a last-dimension norm with a weight and eps {RMSNORM_EPS} "
                                             f"(eps {eps})")
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

    # ---- install / remove ----

    def _set(self, owner, name, make):
        orig = getattr(owner, name)
        self._saved.append((owner, name, orig))
        setattr(owner, name, make(orig))

    def __enter__(self):
        self._set(F, "linear", self._linear)
        self._set(torch, "matmul", lambda o: self._matmul("torch.matmul", o))
        self._set(torch, "mm", lambda o: self._matmul("torch.mm", o))
        self._set(torch.Tensor, "matmul", lambda o: self._matmul("Tensor.matmul", o))
        self._set(torch.Tensor, "__matmul__", lambda o: self._matmul("Tensor.__matmul__", o))
        self._set(F, "softmax", lambda o: self._softmax("F.softmax", o))
        self._set(torch, "softmax", lambda o: self._softmax("torch.softmax", o))
        self._set(torch.Tensor, "softmax", lambda o: self._softmax("Tensor.softmax", o))
        self._set(F, "layer_norm", self._layer_norm)
        self._set(F, "rms_norm", self._rms_norm)
        self._set(F, "scaled_dot_product_attention", self._sdpa)
        return self

    def __exit__(self, *exc):
        while self._saved:
            owner, name, orig = self._saved.pop()
            setattr(owner, name, orig)
        return False

    def reset_counts(self):
        self.replaced.clear()
        self.fallbacks.clear()
