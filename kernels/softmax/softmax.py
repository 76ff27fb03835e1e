"""Row-wise softmax over the last dimension, Triton starter candidate.

Contract (the farm's softmax convention, kernels/softmax/spec.cc):
    softmax_kernel(x_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr)
    x_ptr, y_ptr: contiguous row-major [rows, cols], same dtype (fp32, fp16 or bf16; the dtype
    comes from the pointer types of the compile signature, so one source serves every dtype).
    rows, cols: int64, both >= 1. Grid = (rows, 1, 1): one program per row; a program whose row
    is out of range returns, so a larger grid is harmless.
    Compile with e.g.
        compile.py --source softmax.py --kernel softmax_kernel \
            --signature 'x_ptr:*fp16,y_ptr:*fp16,rows:i64,cols:i64' --constexpr BLOCK=1024

Tunables: BLOCK (columns per step, a power of two), num_warps, num_stages.

Algorithm: one read sweep keeps a running (max, sum of exp) per lane of a BLOCK-wide tile (online
softmax, Milakov & Gimelshein 2018, arXiv:1805.02867), the lanes are combined once at the end,
and a second read sweep writes exp(x - max) / sum. All arithmetic in fp32. Exponents are formed
as (x - max) * log2(e), never x * log2(e) - max * log2(e), for the reason given in
kernels/softmax/softmax.cu (large row offsets lose the fp32 tolerance otherwise).

Special values follow PyTorch: a NaN anywhere in a row makes the whole row NaN (the lane maximum
propagates NaN, so it is not dropped while the statistics are still empty); a row of -inf gives
NaN (0 / 0); a +inf gives NaN through inf - inf.
"""

import triton
import triton.language as tl

_LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    if row >= rows:
        return
    x_row = x_ptr + row * cols
    y_row = y_ptr + row * cols
    offs = tl.arange(0, BLOCK)

    # Pass 1: per-lane running max m and sum s of exp(x - m); -inf marks an empty lane.
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        idx = start + offs
        x = tl.load(x_row + idx, mask=idx < cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x, propagate_nan=tl.PropagateNan.ALL)
        empty = m_new == float("-inf")  # nothing but -inf in this lane so far
        alpha = tl.where(empty, 0.0, tl.exp2((m - m_new) * _LOG2E))
        p = tl.where(empty, 0.0, tl.exp2((x - m_new) * _LOG2E))
        s = s * alpha + p
        m = m_new

    # Combine the lanes: row max mx, row sum of exp(x - mx).
    mx = tl.max(m, axis=0)
    w = tl.where(m == float("-inf"), 0.0, tl.exp2((m - mx) * _LOG2E))
    total = tl.sum(s * w, axis=0)
    inv = 1.0 / total

    # Pass 2: write exp(x - mx) / total in the output dtype.
    for start in range(0, cols, BLOCK):
        idx = start + offs
        mask = idx < cols
        x = tl.load(x_row + idx, mask=mask, other=0.0).to(tl.float32)
        y = tl.exp2((x - mx) * _LOG2E) * inv
        tl.store(y_row + idx, y.to(y_ptr.dtype.element_ty), mask=mask)
