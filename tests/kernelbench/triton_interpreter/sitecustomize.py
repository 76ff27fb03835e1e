"""Put on PYTHONPATH by tests/kernelbench/builtin_test.cc to run Triton kernels on CPU tensors
with TRITON_INTERPRET=1 (Python imports sitecustomize at start-up).

Triton 3.6's interpreter turns a scalar kernel argument into a one-element array and converts it
back with int(array), which NumPy 2.4 refuses for arrays of one dimension ("only 0-dimensional
arrays can be converted to Python scalars"), so every `range(0, cols, BLOCK)` over a runtime
argument fails. This rebinds that conversion to read the single element. Nothing else changes.
"""

import os

if os.environ.get("TRITON_INTERPRET") == "1":
    import triton.runtime.interpreter as _interpreter

    _patch_lang_tensor = _interpreter._patch_lang_tensor

    def _index(self):
        data = self.handle.data
        return int(data.reshape(-1)[0]) if data.size == 1 else int(data)

    def _patched(tensor, scope):
        _patch_lang_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", _index)

    _interpreter._patch_lang_tensor = _patched
