"""PyTorch's own kernels for an op and shape, for Nsight Compute beside the farm's (scripts/gpu-session.sh,
AK_GPU_STEPS=ncu): the op runs 12 times on CUDA, so that `ncu --launch-skip 10 --launch-count 1`
profiles a warm launch (the op's kernels are its only launches: the inputs are made on the CPU).

    python3 bench/ncu_pytorch.py matmul 4096,4096,4096 bf16
    python3 bench/ncu_pytorch.py flash_attention 2,32,2048,128 bf16
"""
import sys

import torch

OPS = ("matmul", "flash_attention")


def main(argv):
    if len(argv) != 4 or argv[1] not in OPS:
        sys.exit(f"usage: ncu_pytorch.py {{{'|'.join(OPS)}}} DIMS (comma-separated) fp16|bf16")
    op, dtype = argv[1], {"fp16": torch.float16, "bf16": torch.bfloat16}.get(argv[3])
    dims = [int(d) for d in argv[2].split(",")]
    if dtype is None or any(d < 1 for d in dims):
        sys.exit(f"ncu_pytorch.py: bad dtype {argv[3]!r} or dims {argv[2]!r}")
    torch.manual_seed(0)
    # Inputs made on the CPU and copied: no kernel launch but the op's, so that ncu's launch count
    # is the op's alone.
    def rand(*shape):
        return torch.randn(*shape).to(device="cuda", dtype=dtype)

    if op == "matmul":
        m, n, k = dims
        a, b = rand(m, k), rand(k, n)
        run = lambda: torch.matmul(a, b)  # noqa: E731
    else:
        q, k, v = rand(*dims), rand(*dims), rand(*dims)
        run = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)  # noqa: E731
    for _ in range(12):
        run()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv)
