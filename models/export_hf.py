"""Writes the farm's tuned kernels as a Hugging Face Kernels package (`autokernel export --hf`).

    python export_hf.py --manifest plug.json --ops-library libautokernel_ops.so --out DIR
                        [--name autokernel_tuned] [--gpu-model "NVIDIA H200"] [--build]

The manifest is what the worker writes for a verify job (models/plug/ops.cc): one compiled cuda or
triton kernel per (kernel type, shape, dtype). libautokernel_ops.so gives each entry's launch plan
(torch.ops.autokernel.plan: grid, block, shared memory and parameters of every launch of one call,
as the sandbox verified and timed it), which this script writes into the package with the cubins,
so that the package runs the kernels without the farm (models/export/README.md). --build runs the
package's build.py. Exit status: 0 written (and built), 2 bad input, 1 the build failed.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import torch

from classify import NORM_FAMILY, NORM_TYPES  # the norm kernel types by their eps (beside this file)

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = os.path.join(HERE, "export")
# The operators of export/torch_binding.cpp; a kernel type outside it cannot be exported.
KERNEL_TYPES = {"softmax", "reduce", "reduce_max", "cross_entropy", "matmul", "flash_attention",
                "flash_attention_causal", "fused_mlp", "rotary_embedding"} | set(NORM_FAMILY)
MARKER = ".autokernel-export"  # what marks a folder as a package this script wrote (and may replace)
PARAM_KINDS = {"input": "kInput", "output": "kOutput", "workspace": "kWorkspace", "value": "kValue"}


def fail(msg, code=2):
    sys.stderr.write(f"export_hf: {msg}\n")
    sys.exit(code)


def c_array(data):
    lines = []
    for i in range(0, len(data), 24):
        lines.append("  " + ",".join(str(b) for b in data[i:i + 24]) + ",")
    return "\n".join(lines)


def tensor_desc(t):
    sizes = list(t["sizes"])
    if len(sizes) > 6:
        fail(f"a tensor of {len(sizes)} dimensions (at most 6)")
    padded = sizes + [0] * (6 - len(sizes))
    return f"{{{len(sizes)}, {{{', '.join(str(s) for s in padded)}}}, {int(t['dtype'])}}}"


def variant_c(v, fallback_block=(1, 1, 1)):
    if v is None:
        return "{-1, {1, 1, 1}, 0}"
    block = v.get("block", fallback_block)
    return f"{{{int(v['build'])}, {{{block[0]}, {block[1]}, {block[2]}}}, {int(v['shared_bytes'])}}}"


def entries_cc(entries, arch):
    out = ["// Written by `autokernel export --hf` (models/export_hf.py): the tuned kernels and their launches.",
           '#include <entries.h>', "", "namespace akx {", "namespace {", ""]
    descs = []
    for i, e in enumerate(entries):
        plan = e["plan"]
        for b, build in enumerate(plan["builds"]):
            with open(build["cubin"], "rb") as f:
                data = f.read()
            out.append(f"// {e['kernel_type']} {e['shape']} {e['dtype']}, build {b}: {os.path.basename(build['cubin'])}")
            out.append(f"const unsigned char k{i}_b{b}[] = {{\n{c_array(data)}\n}};")
        out.append(f"const Build k{i}_builds[] = {{" + ", ".join(
            f'{{k{i}_b{b}, sizeof(k{i}_b{b}), "{build["function"]}"}}' for b, build in enumerate(plan["builds"])) + "};")
        out.append(f"const TensorDesc k{i}_inputs[] = {{" + ", ".join(tensor_desc(t) for t in plan["inputs"]) + "};")
        launches = []
        for l, launch in enumerate(plan["launches"]):
            params = ", ".join(f"{{ParamKind::{PARAM_KINDS[p[0]]}, {int(p[1])}, {int(p[2])}}}" for p in launch["params"])
            out.append(f"const Param k{i}_l{l}_params[] = {{{params}}};")
            aligned = launch.get("aligned")
            div = aligned["divisible"] if aligned else []
            if div:
                out.append(f"const int k{i}_l{l}_div[] = {{{', '.join(str(int(d)) for d in div)}}};")
            g = launch["grid"]
            launches.append(f"{{{{{g[0]}, {g[1]}, {g[2]}}}, {variant_c(launch)}, {variant_c(aligned)}, "
                            f"{f'k{i}_l{l}_div' if div else 'nullptr'}, {len(div)}, k{i}_l{l}_params, "
                            f"{len(launch['params'])}}}")
        out.append(f"const Launch k{i}_launches[] = {{{', '.join(launches)}}};")
        out.append("")
        descs.append(f'  {{"{e["kernel_type"]}", "{e["dtype"]}", k{i}_inputs, {len(plan["inputs"])}, '
                     f'{tensor_desc(plan["output"])}, {int(plan["workspace_bytes"])}, k{i}_builds, '
                     f'{len(plan["builds"])}, k{i}_launches, {len(plan["launches"])}}},')
    out += ["}  // namespace", "", "const Entry kEntries[] = {", *descs, "};",
            f"const int kNumEntries = {len(entries)};", f'const char* const kArch = "{arch}";', ""]
    for family, name in (("layernorm", "LayerNorms"), ("rmsnorm", "RmsNorms")):
        types = ", ".join(f'{{{eps!r}, "{t}"}}' for eps, t in NORM_TYPES[family].items())
        out += [f"const NormType k{name}[] = {{{types}}};", f"const int kNum{name} = {len(NORM_TYPES[family])};"]
    out += ["", "}  // namespace akx", ""]
    return "\n".join(out)


BUILD_TOML = """[general]
name = "{name}"
universal = false

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/registration.h"]

[kernel.{name}]
backend = "cuda"
cuda-capabilities = ["{capability}"]
src = ["csrc/entries.h", "csrc/entries.cc"]
depends = ["torch"]
"""

OPS_PY = '''import os

import torch

_here = os.path.dirname(os.path.abspath(__file__))
_lib = "{namespace}.so"
# build/<variant>/ holds the library; build/<variant>/{name}/ (for older `kernels`) loads the same file.
for _d in (_here, os.path.dirname(_here)):
    if os.path.exists(os.path.join(_d, _lib)):
        torch.ops.load_library(os.path.realpath(os.path.join(_d, _lib)))
        break
else:
    raise ImportError(f"{{_lib}} not found beside {{_here}}: build the package first (python build.py)")
ops = torch.ops.{namespace}


def add_op_namespace_prefix(op_name):
    return "{namespace}::" + op_name
'''


def write_package(out, args, entries, arch, capability, namespace):
    pkg = os.path.join(out, "torch-ext", args.name)
    os.makedirs(pkg)
    os.makedirs(os.path.join(out, "csrc"))
    shutil.copyfile(os.path.join(TEMPLATES, "entries.h"), os.path.join(out, "csrc", "entries.h"))
    with open(os.path.join(out, "csrc", "entries.cc"), "w") as f:
        f.write(entries_cc(entries, arch))
    shutil.copyfile(os.path.join(TEMPLATES, "torch_binding.cpp"), os.path.join(out, "torch-ext", "torch_binding.cpp"))
    with open(os.path.join(out, "torch-ext", "registration.h"), "w") as f:
        f.write(f"// Written by `autokernel export --hf`: the package's operator namespace.\n#pragma once\n"
                f"#define AKX_NAMESPACE {namespace}\n")
    shutil.copyfile(os.path.join(TEMPLATES, "package_init.py"), os.path.join(pkg, "__init__.py"))
    with open(os.path.join(pkg, "_ops.py"), "w") as f:
        f.write(OPS_PY.format(namespace=namespace, name=args.name))
    listed = []
    for e in entries:
        listed.append({k: e.get(k) for k in ("kernel_type", "backend", "dtype", "shape", "config", "latency_us",
                                              "baseline_us", "speedup", "job_id")}
                      | {"inputs": [{"sizes": t["sizes"], "dtype": t["dtype_name"]} for t in e["plan"]["inputs"]]})
    with open(os.path.join(pkg, "_entries.py"), "w") as f:
        f.write("# Written by `autokernel export --hf`: the tuned kernels in this package, as the farm measured them.\n"
                "import json\n\n")
        f.write(f"ARCH = {arch!r}\nGPU_MODEL = {args.gpu_model!r}\nNAMESPACE = {namespace!r}\n")
        f.write(f"ENTRIES = json.loads({json.dumps(listed, indent=1)!r})\n")
    shutil.copyfile(os.path.join(TEMPLATES, "build.py"), os.path.join(out, "build.py"))
    with open(os.path.join(out, "build.toml"), "w") as f:
        f.write(BUILD_TOML.format(name=args.name, capability=capability))
    with open(os.path.join(out, "package.json"), "w") as f:
        json.dump({"name": args.name, "namespace": namespace, "arch": arch, "capability": capability,
                   "gpu_model": args.gpu_model, "entries": len(entries), "license": args.license}, f, indent=1)
    with open(os.path.join(out, MARKER), "w") as f:
        json.dump({"written_by": "autokernel export --hf", "name": args.name, "namespace": namespace}, f)
    shutil.copyfile(os.path.join(TEMPLATES, "README.md"), os.path.join(out, "README.md"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--ops-library", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", default="autokernel_tuned")
    ap.add_argument("--gpu-model", default="")
    ap.add_argument("--license", default="other", help="the license the package declares (metadata.json)")
    ap.add_argument("--build", action="store_true")
    args = ap.parse_args()
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,61}[a-z0-9]", args.name):
        fail(f"--name {args.name!r}: a Python package name in lower case ([a-z][a-z0-9_]*[a-z0-9])")
    torch.ops.load_library(args.ops_library)
    try:
        entries = json.loads(torch.ops.autokernel.plan(args.manifest))
    except RuntimeError as e:
        fail(str(e).splitlines()[0])
    with open(args.manifest) as f:
        arch = json.load(f).get("arch", "")
    m = re.fullmatch(r"sm_(\d+)(\d)a?", arch)
    if not m:
        fail(f"the manifest's arch {arch!r} is not a CUDA architecture (sm_90a)")
    capability = f"{m.group(1)}.{m.group(2)}"
    for e in entries:
        if e["kernel_type"] not in KERNEL_TYPES:
            fail(f"kernel type {e['kernel_type']!r} has no operator in the package (export/torch_binding.cpp)")
        if e["dtype"] not in ("fp32", "fp16", "bf16"):
            fail(f"dtype {e['dtype']!r}")
        # Written into C++ string literals: identifiers only.
        for b in e["plan"]["builds"]:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,200}", b["function"]):
                fail(f"kernel name {b['function']!r} is not a C identifier")
    if not entries:
        fail("no kernel to export")
    digest = hashlib.sha256(json.dumps([e["plan"]["launches"] for e in entries], sort_keys=True).encode())
    for e in entries:
        for b in e["plan"]["builds"]:
            with open(b["cubin"], "rb") as f:
                digest.update(f.read())
    namespace = f"_{args.name}_{digest.hexdigest()[:7]}"
    final = os.path.abspath(args.out)
    marker = os.path.join(final, MARKER)
    if os.path.exists(final) and not os.path.isdir(final):
        fail(f"{final} exists and is not a folder")
    if os.path.isdir(final) and os.listdir(final):
        try:
            with open(marker) as f:
                mine = json.load(f)
            if not (isinstance(mine, dict) and re.fullmatch(r"_[a-z][a-z0-9_]*_[0-9a-f]{7}", str(mine.get("namespace")))):
                raise ValueError("not ours")
        except (OSError, ValueError):
            fail(f"{final} exists, is not empty and is not a package this command wrote; name another folder")
    # Written beside and swapped in, so an interrupted export leaves the old package whole.
    os.makedirs(os.path.dirname(final), exist_ok=True)
    out = tempfile.mkdtemp(prefix=os.path.basename(final) + ".tmp-", dir=os.path.dirname(final))
    try:
        write_package(out, args, entries, arch, capability, namespace)
        if os.path.isdir(final):
            old = tempfile.mkdtemp(prefix=os.path.basename(final) + ".old-", dir=os.path.dirname(final))
            os.rename(final, os.path.join(old, "p"))
            os.rename(out, final)
            shutil.rmtree(old)
        else:
            if os.path.exists(final):
                os.rmdir(final)
            os.rename(out, final)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    out = final
    print(f"package {args.name} ({len(entries)} kernels, {arch}) written to {out}", flush=True)
    if args.build:
        r = subprocess.run([sys.executable, os.path.join(out, "build.py")], cwd=out)
        if r.returncode != 0:
            fail("the package's build failed (see above)", 1)


if __name__ == "__main__":
    main()
