"""Row-wise reduction over the last dimension (sum, or max with REDUCE_MAX=1), Triton starter
candidate.

Contract (kernels/reduce/spec.cc, the cuda backend's parameter order):
    reduce_kernel(x_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr, REDUCE_MAX: tl.constexpr)
    x [rows, cols], y [rows], one dtype; fp32 accumulation. Grid = (rows, 1, 1): one program per
    row. The sum gives inf on overflow and NaN for NaN or inf - inf; the max propagates NaN.

Tunables: BLOCK (columns per step, a power of two), REDUCE_MAX (0: reduce, 1: reduce_max;
fixed by the kernel type), num_warps, num_stages.
"""

import triton
import triton.language as tl


@triton.jit
def reduce_kernel(x_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr, REDUCE_MAX: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    if row >= rows:
        return
    x_row = x_ptr + row * cols
    offs = tl.arange(0, BLOCK)
    if REDUCE_MAX:
        acc = tl.full([BLOCK], float("-inf"), tl.float32)
        for start in range(0, cols, BLOCK):
            idx = start + offs
            x = tl.load(x_row + idx, mask=idx < cols, other=float("-inf")).to(tl.float32)
            acc = tl.maximum(acc, x, propagate_nan=tl.PropagateNan.ALL)
        # tl.max may drop NaN lanes: a lane that saw a NaN holds NaN (propagate_nan above)
        has_nan = tl.sum((acc != acc).to(tl.int32), axis=0) > 0
        out = tl.where(has_nan, float("nan"), tl.max(acc, axis=0))
    else:
        acc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, cols, BLOCK):
            idx = start + offs
            acc += tl.load(x_row + idx, mask=idx < cols, other=0.0).to(tl.float32)
        out = tl.sum(acc, axis=0)
    tl.store(y_ptr + row, out.to(y_ptr.dtype.element_ty))
