"""Layer normalisation over the last dimension with weight and bias, Triton starter candidate.

Contract (kernels/layernorm/spec.cc, the cuda backend's parameter order):
    layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr)
    x, y: [rows, cols]; w, b: [cols]; one dtype (from the pointer types of the signature).
    y = (x - mean) * rsqrt(var + 1e-5) * w + b, biased variance, fp32 arithmetic.
    Grid = (rows, 1, 1): one program per row.

Tunables: BLOCK (columns per step, a power of two), num_warps, num_stages.

Three passes over the row, as in layernorm.cu: the mean, the variance as the mean of
(x - mean)^2, then the output; passes two and three read the row from L1/L2.
"""

import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    if row >= rows:
        return
    x_row = x_ptr + row * cols
    y_row = y_ptr + row * cols
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        idx = start + offs
        acc += tl.load(x_row + idx, mask=idx < cols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / cols
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        idx = start + offs
        mask = idx < cols
        d = tl.load(x_row + idx, mask=mask, other=0.0).to(tl.float32) - mean
        acc += tl.where(mask, d * d, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + 1e-5)
    for start in range(0, cols, BLOCK):
        idx = start + offs
        mask = idx < cols
        x = tl.load(x_row + idx, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + idx, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + idx, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_row + idx, y.to(y_ptr.dtype.element_ty), mask=mask)
