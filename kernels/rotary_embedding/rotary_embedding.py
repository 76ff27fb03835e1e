"""Rotary position embedding (rotate-half convention), Triton starter candidate.

Contract (kernels/rotary_embedding/spec.cc, the cuda backend's parameter order):
    rotary_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr, tokens, heads, dim, BLOCK: tl.constexpr)
    x, y [tokens, heads, dim]; cos, sin [tokens, dim / 2]; one dtype. With h = dim / 2:
    y[..., :h] = x1 * c - x2 * s, y[..., h:] = x2 * c + x1 * s, in fp32.
    Grid = (tokens * heads, 1, 1): one program per (token, head) row, BLOCK pairs per step.

Tunables: BLOCK (pairs per step, a power of two), num_warps, num_stages.
"""

import triton
import triton.language as tl


@triton.jit
def rotary_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr, tokens, heads, dim, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    if row >= tokens * heads:
        return
    h = dim // 2
    token = row // heads
    x_row = x_ptr + row * dim
    y_row = y_ptr + row * dim
    offs = tl.arange(0, BLOCK)
    for start in range(0, h, BLOCK):
        j = start + offs
        mask = j < h
        a = tl.load(x_row + j, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(x_row + h + j, mask=mask, other=0.0).to(tl.float32)
        c = tl.load(cos_ptr + token * h + j, mask=mask, other=0.0).to(tl.float32)
        s = tl.load(sin_ptr + token * h + j, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + j, (a * c - b * s).to(y_ptr.dtype.element_ty), mask=mask)
        tl.store(y_row + h + j, (b * c + a * s).to(y_ptr.dtype.element_ty), mask=mask)
