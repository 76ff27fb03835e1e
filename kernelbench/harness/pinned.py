"""Functions captured before any problem or candidate code runs, and when the process started.

The faithful path looks timing and comparison functions up at call time, as KernelBench does (a
candidate that patches them fools it exactly as it would fool KernelBench); the strict checks use
these pinned originals. Imported first (__main__), before torch: STARTED is the start of a
baseline's "start" phase (the fork server resets it in each child).
"""

import time

PERF_COUNTER = time.perf_counter
STARTED = time.monotonic()

import torch  # noqa: E402


PINNED = {
    "clone": torch.Tensor.clone,
    "detach": torch.Tensor.detach,
    "cpu": torch.Tensor.cpu,
    "equal": torch.equal,
    "allclose": torch.allclose,
    "isfinite": torch.isfinite,
    "empty": torch.empty,
    "save": torch.save,
    "event": torch.cuda.Event,
    "event_record": torch.cuda.Event.record,
    "event_elapsed": torch.cuda.Event.elapsed_time,
    "synchronize": torch.cuda.synchronize,
    "empty_cache": torch.cuda.empty_cache,
    "current_stream": torch.cuda.current_stream,
}
