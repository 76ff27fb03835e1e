"""Builds this package's torch extension and lays it out as Hugging Face Kernels loads it:

    build/<variant>/                  __init__.py, _ops.py, _entries.py, <namespace>.so, metadata.json
    build/<variant>/<name>/           the same Python files, for older `kernels` releases

where <variant> is torch<major><minor>-cxx11-cu<cuda>-<arch>-linux of the torch that runs this
script. The kernels are prebuilt cubins (csrc/entries.cc), so only a C++ compiler and PyTorch's and
CUDA's headers are needed: python build.py [--cxx c++] [--jobs 2]
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import torch
from torch.utils import cpp_extension

HERE = os.path.dirname(os.path.abspath(__file__))


def variant():
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    if not torch.version.cuda:
        sys.exit("build.py: this torch has no CUDA; the package's kernels need a CUDA build of torch")
    cuda = "".join(torch.version.cuda.split(".")[:2])
    abi = "cxx11" if torch._C._GLIBCXX_USE_CXX11_ABI else "cxx98"
    return f"torch{major}{minor}-{abi}-cu{cuda}-{platform.machine()}-{platform.system().lower()}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cxx", default=os.environ.get("CXX", "c++"))
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    with open(os.path.join(HERE, "package.json")) as f:
        package = json.load(f)
    name, namespace = package["name"], package["namespace"]
    out = os.path.join(HERE, "build", variant())
    # Objects outside build/, where `kernels` looks for variants only.
    tmp = tempfile.TemporaryDirectory(prefix="autokernel-build-")
    objs = tmp.name
    includes = [f"-I{os.path.join(HERE, d)}" for d in ("csrc", "torch-ext")]
    includes += [f"-I{d}" for d in cpp_extension.include_paths("cuda")]
    flags = ["-O2", "-std=c++17", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]
    sources = [os.path.join(HERE, "csrc", "entries.cc"), os.path.join(HERE, "torch-ext", "torch_binding.cpp")]

    def compile_one(src):
        obj = os.path.join(objs, os.path.basename(src) + ".o")
        cmd = [args.cxx, *flags, *includes, "-c", src, "-o", obj]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stderr)
            sys.exit(f"build.py: compiling {src} failed: {' '.join(cmd)}")
        return obj

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        objects = list(pool.map(compile_one, sources))
    libs = [f"-L{d}" for d in cpp_extension.library_paths("cpu")] + ["-lc10", "-lc10_cuda", "-ltorch_cpu", "-ltorch"]
    os.makedirs(out, exist_ok=True)
    so = os.path.join(out, f"{namespace}.so")
    cmd = [args.cxx, "-shared", "-o", so, *objects, *libs, "-ldl"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        sys.exit(f"build.py: linking failed: {' '.join(cmd)}")
    compat = os.path.join(out, name)
    os.makedirs(compat, exist_ok=True)
    for d in (out, compat):
        for f in ("__init__.py", "_ops.py", "_entries.py"):
            shutil.copyfile(os.path.join(HERE, "torch-ext", name, f), os.path.join(d, f))
    # What `kernels` (0.19) reads before it imports a variant.
    with open(os.path.join(out, "metadata.json"), "w") as f:
        json.dump({"name": name.replace("_", "-"), "id": namespace, "version": 1, "license": package["license"],
                   "python-depends": [], "backend": {"type": "cuda", "archs": [package["capability"]]}}, f)
    print(out)


if __name__ == "__main__":
    main()
