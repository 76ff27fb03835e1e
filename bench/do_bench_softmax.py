"""torch.softmax on a 4096x4096 fp16 input timed by triton.testing.do_bench (cold: do_bench
clears a 256 MB buffer between runs), the reference figure for the farm's own cold timing of the
same op. Prints one JSON line. Run on the GPU the farm measured, right after it."""
import json
import sys

import torch
import triton
from triton.testing import do_bench

rows, cols = (int(v) for v in (sys.argv[1:3] if len(sys.argv) >= 3 else (4096, 4096)))
x = torch.randn(rows, cols, device="cuda", dtype=torch.float16) * 3
medians = [do_bench(lambda: torch.softmax(x, dim=-1), warmup=100, rep=2000, return_mode="median") for _ in range(5)]
print(json.dumps({"shape": [rows, cols], "dtype": "fp16", "triton": triton.__version__, "torch": torch.__version__,
                  "gpu": torch.cuda.get_device_name(), "do_bench_median_us_runs": [m * 1000 for m in medians],
                  "do_bench_median_us": sorted(medians)[2] * 1000}))
