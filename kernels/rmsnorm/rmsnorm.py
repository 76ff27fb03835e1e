"""RMS normalisation over the last dimension, Triton starter candidate.

Contract (kernels/rmsnorm/spec.cc, the cuda backend's parameter order):
    rmsnorm_kernel(x_ptr, w_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr)
    x, y: [rows, cols]; w: [cols]; one dtype (from the pointer types of the signature).
    y = x * rsqrt(mean(x^2) + 1e-6) * w in fp32. Grid = (rows, 1, 1): one program per row.

Tunables: BLOCK (columns per step, a power of two), num_warps, num_stages.
Two passes over the row, as in rmsnorm.cu: the sum of squares, then the output.
"""

import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    if row >= rows:
        return
    x_row = x_ptr + row * cols
    y_row = y_ptr + row * cols
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        idx = start + offs
        x = tl.load(x_row + idx, mask=idx < cols, other=0.0).to(tl.float32)
        acc += x * x
    r = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + 1e-6)
    for start in range(0, cols, BLOCK):
        idx = start + offs
        mask = idx < cols
        x = tl.load(x_row + idx, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + idx, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + idx, (x * r * w).to(y_ptr.dtype.element_ty), mask=mask)
