"""Cross-entropy loss per row of logits, Triton starter candidate.

Contract (kernels/cross_entropy/spec.cc, the cuda backend's parameter order):
    cross_entropy_kernel(logits_ptr, targets_ptr, loss_ptr, rows, cols, BLOCK: tl.constexpr)
    logits [rows, cols] (fp32, fp16 or bf16), targets [rows] int64 in [0, cols), loss [rows] in
    the logits' dtype: loss = logsumexp(x) - x[t], in fp32; a target out of range gives NaN.
    Grid = (rows, 1, 1): one program per row.

Tunables: BLOCK, num_warps, num_stages.

One sweep with a per-lane running (max, sum of exp) as in softmax.py, combined at the end; the
loss is log(s) - (x_t - m). A NaN or +inf in a row gives NaN, a target logit of -inf gives +inf.
"""

import triton
import triton.language as tl

_LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def cross_entropy_kernel(logits_ptr, targets_ptr, loss_ptr, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    if row >= rows:
        return
    x_row = logits_ptr + row * cols
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        idx = start + offs
        x = tl.load(x_row + idx, mask=idx < cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x, propagate_nan=tl.PropagateNan.ALL)
        empty = m_new == float("-inf")
        alpha = tl.where(empty, 0.0, tl.exp2((m - m_new) * _LOG2E))
        p = tl.where(empty, 0.0, tl.exp2((x - m_new) * _LOG2E))
        s = s * alpha + p
        m = m_new
    mx = tl.max(m, axis=0)
    w = tl.where(m == float("-inf"), 0.0, tl.exp2((m - mx) * _LOG2E))
    total = tl.sum(s * w, axis=0)
    t = tl.load(targets_ptr + row)
    valid = (t >= 0) & (t < cols)
    xt = tl.load(x_row + tl.where(valid, t, 0)).to(tl.float32)
    xt = tl.where(valid, xt, float("nan"))
    loss = tl.log(total) - (xt - mx)
    tl.store(loss_ptr + row, loss.to(loss_ptr.dtype.element_ty))
