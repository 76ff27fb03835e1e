#!/usr/bin/env python3
"""Ahead-of-time compiler for the farm's Triton candidates: Triton source -> cubin + launch ABI.

The worker's compile pool runs this as a subprocess, with no GPU needed:

    python compile.py --source softmax.py --kernel softmax_kernel \\
        --signature 'x_ptr:*fp16,y_ptr:*fp16,rows:i64,cols:i64' \\
        --constexpr BLOCK=1024 --num-warps 4 --num-stages 3 --arch 90 --out-dir DIR

and, on success (exit 0), finds DIR/kernel.cubin and DIR/kernel.json. The JSON (format 1) says
how to launch the cubin with cuModuleLoadData + cuModuleGetFunction + cuLaunchKernel; its fields
are described in README.md next to this file, and `params` lists every parameter the cubin
expects, hidden trailing ones included.

Failures exit nonzero, write nothing to DIR and print one line "compile.py: error: ..." on
stderr; a compile error follows that line with Triton's full diagnostic. Exit codes:
    2  bad command line or signature (argparse uses 2 as well)
    3  source file missing or failing to import
    4  kernel not found in the source
    5  Triton compile error (front end, MLIR/LLVM passes or ptxas)
    6  the compiled cubin does not have the parameter list this script expects (a Triton change)

Specialisation: the cubin depends only on what the command line says. No divisibility-by-16
assumptions are made about pointers or integers unless a parameter is named with --divisible
(then every value the harness passes for it must be a multiple of 16: bytes for pointers,
the value itself for integers); integers are never specialised on their value (Triton's JIT
turns an int equal to 1 into a constant; here only --constexpr does that).

Triton's on-disk cache is not used unless --cache-dir is given: each run compiles from scratch in
a private temporary cache (removed on exit), so compile time is honest and nothing is left
outside DIR.
"""

import argparse
import contextlib
import hashlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

FORMAT_VERSION = 1

EXIT_USAGE = 2
EXIT_SOURCE = 3
EXIT_KERNEL = 4
EXIT_COMPILE = 5
EXIT_ABI = 6

# Scalar and pointee types accepted in --signature (Triton's own spellings).
SCALAR_TYPES = {
    "i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32", "u64",
    "fp16", "bf16", "fp32", "fp64",
}
POINTEE_TYPES = SCALAR_TYPES | {"fp8e4nv", "fp8e5", "fp8e4b15", "fp8e4b8", "fp8e5b16"}

# Bytes of each PTX parameter type.
PTX_TYPE_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8}


class CompileFailure(Exception):
    """An expected failure: exit with `code` after printing `message` (one line) and `detail`."""

    def __init__(self, code, message, detail=""):
        super().__init__(message)
        self.code = code
        self.message = message
        self.detail = detail


def one_line(text):
    return " ".join(str(text).split())


# ---------------------------------------------------------------------------------------------
# Command line


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="compile.py",
        description="Compile one @triton.jit kernel to a cubin plus launch metadata (kernel.json).")
    p.add_argument("--source", required=True, help="Python file defining the @triton.jit kernel")
    p.add_argument("--kernel", default=None,
                   help="name of the @triton.jit function; optional when the file defines exactly one")
    p.add_argument("--signature", required=True,
                   help="runtime parameters in the kernel's order, 'name:type,...'; types are Triton's: "
                   "*fp16 *bf16 *fp32 ... (pointers, *k... for const), i32 i64 u32 fp32 ... (scalars). "
                   "Empty string for a kernel with only constexpr parameters.")
    p.add_argument("--constexpr", action="append", default=[], metavar="NAME=VALUE",
                   help="value of a tl.constexpr parameter (int, float, True/False); repeatable. "
                   "A constexpr parameter with a default may be left out.")
    p.add_argument("--divisible", action="append", default=[], metavar="NAME",
                   help="promise that parameter NAME is a multiple of 16 (pointers: address in bytes) "
                   "at every launch, letting Triton vectorise; repeatable. Default: no such promise.")
    p.add_argument("--num-warps", type=int, default=4, help="warps per program (power of two; default 4)")
    p.add_argument("--num-stages", type=int, default=3, help="software pipelining depth (default 3)")
    p.add_argument("--maxnreg", type=int, default=None, help="cap on registers per thread (ptx .maxnreg)")
    p.add_argument("--arch", default="90",
                   help="compute capability: 90, sm_90, sm_90a, 80 ... (default 90; 90 and up build sm_XXa)")
    p.add_argument("--out-dir", required=True, help="directory for kernel.cubin and kernel.json (created)")
    p.add_argument("--cache-dir", default=None,
                   help="Triton cache directory to reuse between runs (default: a private temporary one)")
    p.add_argument("--keep-ir", action="store_true",
                   help="also write kernel.ttir, kernel.ttgir, kernel.llir, kernel.ptx to the out dir")
    return p.parse_args(argv)


def parse_arch(text):
    m = re.fullmatch(r"(?:sm_?)?(\d+)a?", text.strip())
    if not m:
        raise CompileFailure(EXIT_USAGE, f"--arch {text!r} is not a compute capability; expected e.g. 90 or sm_90a")
    return int(m.group(1))


def parse_signature(text):
    """'a:*fp16, n:i64' -> [('a', '*fp16'), ('n', 'i64')], validated."""
    entries = []
    seen = set()
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            if text.strip():
                raise CompileFailure(EXIT_USAGE, f"--signature {text!r} has an empty entry; expected 'name:type,...'")
            continue
        if item.count(":") != 1:
            raise CompileFailure(EXIT_USAGE, f"--signature entry {item!r} is not 'name:type' (e.g. 'x_ptr:*fp16')")
        name, ty = (s.strip() for s in item.split(":"))
        if not name.isidentifier():
            raise CompileFailure(EXIT_USAGE, f"--signature entry {item!r}: {name!r} is not a parameter name")
        if name in seen:
            raise CompileFailure(EXIT_USAGE, f"--signature names parameter {name!r} twice")
        seen.add(name)
        if ty.startswith("*"):
            pointee = ty[2:] if ty.startswith("*k") else ty[1:]
            ok = pointee in POINTEE_TYPES
        else:
            ok = ty in SCALAR_TYPES
        if not ok:
            raise CompileFailure(
                EXIT_USAGE, f"--signature entry {item!r}: unknown type {ty!r}; expected a pointer "
                f"(*fp16, *bf16, *fp32, *i32, ... or *k... for const) or a scalar ({', '.join(sorted(SCALAR_TYPES))})")
        entries.append((name, ty))
    return entries


def parse_constexpr_value(text):
    if text in ("True", "true"):
        return True
    if text in ("False", "false"):
        return False
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    raise CompileFailure(EXIT_USAGE, f"constexpr value {text!r} is not an int, a float or True/False")


def parse_constexprs(items):
    out = {}
    for item in items:
        if "=" not in item:
            raise CompileFailure(EXIT_USAGE, f"--constexpr {item!r} is not NAME=VALUE (e.g. BLOCK=1024)")
        name, value = (s.strip() for s in item.split("=", 1))
        if not name.isidentifier():
            raise CompileFailure(EXIT_USAGE, f"--constexpr {item!r}: {name!r} is not a parameter name")
        if name in out:
            raise CompileFailure(EXIT_USAGE, f"--constexpr gives {name!r} twice")
        out[name] = parse_constexpr_value(value)
    return out


# ---------------------------------------------------------------------------------------------
# Loading the source


def load_kernel(source, kernel_name):
    import triton
    from triton.runtime.jit import JITFunction

    path = os.path.abspath(source)
    if not os.path.isfile(path):
        raise CompileFailure(EXIT_SOURCE, f"source file {source!r} not found")
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    # A unique module name keeps candidates from colliding with each other or with real modules;
    # the file's folder is not put on sys.path. Registered in sys.modules because inspect (which
    # Triton uses to read the kernel's source) and dataclasses look modules up there.
    mod_name = f"_ak_triton_candidate_{digest[:16]}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    try:
        with contextlib.redirect_stdout(sys.stderr):
            spec.loader.exec_module(mod)
    except SyntaxError as e:
        raise CompileFailure(EXIT_SOURCE, f"{source}:{e.lineno}:{e.offset}: syntax error: {e.msg}")
    except Exception as e:
        raise CompileFailure(EXIT_SOURCE, f"importing {source} failed: {type(e).__name__}: {one_line(e)}")

    jit_fns = {k: v for k, v in vars(mod).items() if isinstance(v, JITFunction) and v.__module__ == mod_name}
    if kernel_name is None:
        if len(jit_fns) != 1:
            found = ", ".join(sorted(jit_fns)) or "none"
            raise CompileFailure(EXIT_KERNEL, f"{source} defines {len(jit_fns)} @triton.jit functions ({found}); "
                                 "name one with --kernel")
        kernel_name = next(iter(jit_fns))
    obj = getattr(mod, kernel_name, None)
    if obj is None:
        found = ", ".join(sorted(jit_fns)) or "none"
        raise CompileFailure(EXIT_KERNEL, f"kernel {kernel_name!r} not found in {source} "
                             f"(its @triton.jit functions: {found})")
    if not isinstance(obj, JITFunction):
        if isinstance(getattr(obj, "fn", None), (JITFunction, triton.runtime.KernelInterface)):
            raise CompileFailure(
                EXIT_KERNEL, f"{kernel_name!r} in {source} is wrapped in @triton.autotune or @triton.heuristics; "
                "compile the bare @triton.jit function and pass the config as --constexpr/--num-warps/--num-stages")
        raise CompileFailure(EXIT_KERNEL, f"{kernel_name!r} in {source} is a {type(obj).__name__}, "
                             "not a @triton.jit function")
    if obj.is_gluon():
        raise CompileFailure(EXIT_KERNEL, f"{kernel_name!r} in {source} is a Gluon kernel; only @triton.jit is supported")
    return obj, digest


# ---------------------------------------------------------------------------------------------
# Building Triton's specialisation


def build_specialisation(fn, sig_entries, constexprs, divisible):
    """Full Triton signature (every parameter, in order), constexprs and attrs, validated against
    the kernel's parameters. Returns (signature, constexprs, attrs, runtime_params)."""
    params = fn.params
    names = [p.name for p in params]
    sig = dict(sig_entries)
    for name in list(sig) + list(constexprs) + list(divisible):
        if name not in names:
            raise CompileFailure(EXIT_USAGE, f"{fn.__name__} has no parameter {name!r}; "
                                 f"its parameters are {', '.join(names)}")
    signature = {}
    values = {}
    runtime = []
    for p in params:
        if p.name in sig and p.name in constexprs:
            raise CompileFailure(EXIT_USAGE, f"parameter {p.name!r} is given both in --signature and as --constexpr")
        if p.name in constexprs:
            signature[p.name] = "constexpr"
            values[p.name] = constexprs[p.name]
        elif p.name in sig:
            if p.is_constexpr:
                raise CompileFailure(EXIT_USAGE, f"parameter {p.name!r} is tl.constexpr; give it as "
                                     f"--constexpr {p.name}=VALUE, not in --signature")
            signature[p.name] = sig[p.name]
            runtime.append((p.name, sig[p.name]))
        elif p.is_constexpr and p.has_default:
            signature[p.name] = "constexpr"
            default = p.default
            values[p.name] = getattr(default, "value", default)
        elif p.is_constexpr:
            raise CompileFailure(EXIT_USAGE, f"constexpr parameter {p.name!r} has no value; pass --constexpr {p.name}=VALUE")
        else:
            raise CompileFailure(EXIT_USAGE, f"parameter {p.name!r} is missing from --signature; "
                                 f"give it a type, e.g. '{p.name}:i64'")
    # The signature describes the launch ABI, so its order must be the kernel's.
    given_order = [n for n, _ in sig_entries]
    kernel_order = [n for n, _ in runtime]
    if given_order != kernel_order:
        raise CompileFailure(EXIT_USAGE, f"--signature order {','.join(given_order)} differs from the kernel's "
                             f"runtime parameter order {','.join(kernel_order)}")
    attrs = {}
    for name in divisible:
        if name in values:
            raise CompileFailure(EXIT_USAGE, f"--divisible {name}: {name!r} is a constexpr")
        ty = signature[name]
        if not (ty.startswith("*") or ty[0] in "iu") or ty in ("i1", "u1"):
            raise CompileFailure(EXIT_USAGE, f"--divisible {name}: only pointer and integer parameters can be "
                                 f"divisible by 16, {name!r} is {ty}")
        attrs[(names.index(name), )] = [["tt.divisibility", 16]]
    return signature, values, attrs, runtime


# ---------------------------------------------------------------------------------------------
# Reading the ABI back from the compiled kernel

_PTX_ENTRY = re.compile(r"\.visible\s+\.entry\s+(\w+)\s*\(([^)]*)\)", re.S)
_PTX_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.([busf])(8|16|32|64)\b[^,]*?(\w+)(?:\[(\d+)\])?\s*$")


def ptx_params(ptx):
    """[(ptx_type, bytes)] of the kernel entry in PTX order."""
    m = _PTX_ENTRY.search(ptx)
    if not m:
        raise CompileFailure(EXIT_ABI, "no .visible .entry in the generated PTX")
    out = []
    body = m.group(2).strip()
    if not body:
        return out
    for decl in body.split(","):
        pm = _PTX_PARAM.search(decl.strip())
        if not pm:
            raise CompileFailure(EXIT_ABI, f"cannot parse PTX parameter {one_line(decl)!r}")
        kind, bits, _, count = pm.groups()
        nbytes = PTX_TYPE_BYTES[bits] * (int(count) if count else 1)
        out.append((f"{kind}{bits}" + (f"[{count}]" if count else ""), nbytes))
    return out


def launch_params(runtime, ptx):
    """The cubin's parameter list: runtime parameters, then Triton's two hidden scratch pointers."""
    expected = [{"name": n, "type": t, "kind": "pointer" if t.startswith("*") else "scalar"} for n, t in runtime]
    # Triton 3.6's launcher (backends/nvidia/driver.py, make_launcher) appends these two to every
    # kernel; they exist in the cubin whether or not the kernel uses them.
    expected.append({"name": "global_scratch", "type": "*i8", "kind": "global_scratch"})
    expected.append({"name": "profile_scratch", "type": "*i8", "kind": "profile_scratch"})
    found = ptx_params(ptx)
    if len(found) != len(expected):
        raise CompileFailure(EXIT_ABI, f"the cubin takes {len(found)} parameters, expected {len(expected)} "
                             f"({', '.join(e['name'] for e in expected)}); Triton's launch ABI changed")
    for e, (ptx_ty, nbytes) in zip(expected, found):
        e["ptx_type"] = ptx_ty
        e["bytes"] = nbytes
        if e["kind"] != "scalar" and nbytes != 8:
            raise CompileFailure(EXIT_ABI, f"pointer parameter {e['name']} is {nbytes} bytes in the cubin, expected 8")
    return expected


def resource_usage(cubin_path):
    """Registers, spills and stack per thread from cuobjdump, best effort ({} if unavailable)."""
    try:
        from triton import knobs
        tool = knobs.nvidia.cuobjdump.path
        out = subprocess.run([tool, "-res-usage", cubin_path], capture_output=True, text=True, timeout=60).stdout
    except Exception:
        return {}
    m = re.search(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)", out)
    if not m:
        return {}
    reg, stack, shared, local = map(int, m.groups())
    return {"registers": reg, "stack_bytes": stack, "static_shared_bytes": shared, "local_bytes": local}


# ---------------------------------------------------------------------------------------------
# Compiling


def _compile_error_location(e, source):
    """'file:line:col' of a Triton CompilationError, or ''."""
    node = getattr(e, "node", None)
    if node is None or not hasattr(node, "lineno"):
        return ""
    # node.lineno counts from the "def" line of the function that failed (the kernel or a
    # @triton.jit helper it calls), whose text is e.src; turn it into a line of the file.
    line = node.lineno
    try:
        with open(source) as f:
            text = f.read()
        at = text.find(e.src) if e.src else -1
        if at >= 0:
            line += text.count("\n", 0, at)
    except OSError:
        pass
    return f"{os.path.basename(source)}:{line}:{node.col_offset}"


def summarise_compile_error(e, source):
    """One line for a Triton exception, plus the full text."""
    from triton.compiler.errors import CompilationError

    full = str(e)
    if isinstance(e, CompilationError):
        # An error inside a @triton.jit helper arrives wrapped in one CompilationError per call
        # level; report the innermost place and the outermost call site.
        chain = [e]
        while isinstance(chain[-1].__cause__, CompilationError):
            chain.append(chain[-1].__cause__)
        inner = chain[-1]
        cause = inner.error_message
        if not cause and inner.__cause__ is not None:
            cause = f"{type(inner.__cause__).__name__}: {inner.__cause__}"
        where = _compile_error_location(inner, source)
        line = f"{where}: {one_line(cause or type(inner).__name__)}" if where else one_line(cause or type(inner).__name__)
        if len(chain) > 1:
            call = _compile_error_location(e, source)
            if call:
                line += f" (called from {call})"
            full = "\n\n".join(str(c) for c in reversed(chain))
        return line, full
    lines = [ln.strip() for ln in full.splitlines() if ln.strip()]
    head = lines[0] if lines else ""
    # ptxas failures carry the assembler's own messages on the lines after "`ptxas` stderr:".
    if "ptxas" in head.lower():
        msgs = [ln for ln in lines if ln.startswith("ptxas") and "stderr" not in ln]
        if msgs:
            head = f"{head}: {msgs[0]}"
    return f"{type(e).__name__}: {one_line(head)}", full


def compile_env():
    """Environment variables that change what Triton generates (for the caller's artefact cache
    key): Triton's own list of cache-invalidating variables plus TRITON_*/PTXAS_* knobs, without
    the cache location."""
    from triton._C.libtriton import get_cache_invalidating_env_vars

    env = dict(get_cache_invalidating_env_vars())
    for k, v in os.environ.items():
        if k.startswith(("TRITON_", "PTXAS_")) and k not in ("TRITON_CACHE_DIR", "TRITON_HOME"):
            env[k] = v
    return dict(sorted(env.items()))


def compile_kernel(args):
    arch = parse_arch(args.arch)
    sig_entries = parse_signature(args.signature)
    constexprs = parse_constexprs(args.constexpr)
    if args.num_warps < 1 or args.num_warps & (args.num_warps - 1):
        raise CompileFailure(EXIT_USAGE, f"--num-warps {args.num_warps} is not a power of two")
    if args.num_stages < 1:
        raise CompileFailure(EXIT_USAGE, f"--num-stages {args.num_stages} must be >= 1")

    if os.environ.get("TRITON_OVERRIDE_ARCH"):
        raise CompileFailure(EXIT_USAGE, f"TRITON_OVERRIDE_ARCH={os.environ['TRITON_OVERRIDE_ARCH']} is set and would "
                             "override --arch; unset it")

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability
    from triton.compiler import ASTSource

    fn, digest = load_kernel(args.source, args.kernel)
    signature, values, attrs, runtime = build_specialisation(fn, sig_entries, constexprs, args.divisible)

    options = {"num_warps": args.num_warps, "num_stages": args.num_stages}
    if args.maxnreg is not None:
        options["maxnreg"] = args.maxnreg
    src = ASTSource(fn, signature=signature, constexprs=values, attrs=attrs)
    target = GPUTarget("cuda", arch, 32)

    # Triton prints the PTX to stdout when ptxas fails; keep stdout clean for the caller.
    chatter = io.StringIO()
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(chatter):
            compiled = triton.compile(src, target=target, options=options)
    except Exception as e:
        line, full = summarise_compile_error(e, args.source)
        raise CompileFailure(EXIT_COMPILE, f"compiling {fn.__name__} failed: {line}", full)
    compile_ms = (time.perf_counter() - start) * 1e3

    md = compiled.metadata
    cubin = compiled.asm["cubin"]
    if cubin[:4] != b"\x7fELF":
        raise CompileFailure(EXIT_ABI, "Triton returned a cubin that is not an ELF file")
    params = launch_params(runtime, compiled.asm["ptx"])
    ptxas = get_ptxas(arch)
    ptx_version = re.search(r"^\.version\s+(\S+)", compiled.asm["ptx"], re.M)

    info = {
        "format": FORMAT_VERSION,
        "triton_version": triton.__version__,
        "source": os.path.abspath(args.source),
        "source_sha256": digest,
        "kernel": fn.__name__,
        "name": md.name,
        "arch": arch,
        "gpu_name": sm_arch_from_capability(arch),
        "ptxas": ptxas.path,
        "ptxas_version": ptxas.version,
        "ptx_version": ptx_version.group(1) if ptx_version else None,
        "env": compile_env(),
        "num_warps": md.num_warps,
        "num_stages": md.num_stages,
        "num_ctas": md.num_ctas,
        "block": [md.num_warps * md.warp_size, 1, 1],
        "cluster": [md.num_ctas, 1, 1],
        "shared_bytes": md.shared,
        "global_scratch_bytes": md.global_scratch_size or 0,
        "global_scratch_align": md.global_scratch_align or 1,
        "profile_scratch_bytes": md.profile_scratch_size or 0,
        "profile_scratch_align": md.profile_scratch_align or 1,
        "launch_cooperative_grid": bool(md.launch_cooperative_grid),
        "launch_pdl": bool(md.launch_pdl),
        "tmem_bytes": md.tmem_size or 0,
        "params": params,
        "constexprs": values,
        "divisible_by_16": sorted(args.divisible),
        "maxnreg": args.maxnreg,
        "compile_ms": round(compile_ms, 1),
    }
    return info, compiled


def write_outputs(out_dir, info, compiled, keep_ir):
    os.makedirs(out_dir, exist_ok=True)
    cubin_path = os.path.join(out_dir, "kernel.cubin")
    json_path = os.path.join(out_dir, "kernel.json")

    def put(path, data):
        # Write to a temporary name and rename, so a reader never sees half a file.
        tmp = f"{path}.tmp.{os.getpid()}"
        with open(tmp, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        os.replace(tmp, path)

    put(cubin_path, compiled.asm["cubin"])
    info.update(resource_usage(cubin_path))
    if keep_ir:
        for ext in ("ttir", "ttgir", "llir", "ptx"):
            if ext in compiled.asm:
                put(os.path.join(out_dir, f"kernel.{ext}"), compiled.asm[ext])
    # kernel.json last: its presence means the compile succeeded.
    put(json_path, json.dumps(info, indent=2) + "\n")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    sys.dont_write_bytecode = True  # no __pycache__ next to the candidate's source
    # Remove a previous run's outputs first, so a failed compile leaves no stale artefact.
    for name in ("kernel.json", "kernel.cubin"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(args.out_dir, name))
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="ak-triton-cache-")
    os.environ["TRITON_CACHE_DIR"] = os.path.abspath(cache_dir)
    try:
        info, compiled = compile_kernel(args)
        write_outputs(args.out_dir, info, compiled, args.keep_ir)
    except CompileFailure as e:
        print(f"compile.py: error: {one_line(e.message)}", file=sys.stderr)
        if e.detail:
            print(e.detail.rstrip(), file=sys.stderr)
        return e.code
    except Exception as e:  # a bug here or in Triton: still one clear line first
        import traceback
        print(f"compile.py: error: internal error: {type(e).__name__}: {one_line(e)}", file=sys.stderr)
        traceback.print_exc()
        return 1
    finally:
        if args.cache_dir is None:
            shutil.rmtree(cache_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
