#!/usr/bin/env python3
"""Tests of compile.py that need no GPU (stdlib unittest; run with the Python that has Triton):

    .venv/bin/python tests/worker/triton/compile_test.py

Each test runs compile.py as a subprocess, as the worker does.
"""

import json
import os
import struct
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
COMPILE = os.path.join(ROOT, "worker", "triton", "compile.py")
SOFTMAX = os.path.join(ROOT, "kernels", "softmax", "softmax.py")
EM_CUDA = 190  # ELF e_machine of NVIDIA cubins


def softmax_signature(dtype):
    return f"x_ptr:*{dtype},y_ptr:*{dtype},rows:i64,cols:i64"


def run_compile(*args):
    env = dict(os.environ)
    env.pop("TRITON_OVERRIDE_ARCH", None)
    return subprocess.run([sys.executable, COMPILE, *args], capture_output=True, text=True, env=env, timeout=300)


class CompileTestCase(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="ak-triton-test-")
        self.out = os.path.join(self.tmp.name, "out")

    def tearDown(self):
        self.tmp.cleanup()

    def write_source(self, name, text):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def assert_fails(self, proc, code, *needles):
        self.assertEqual(proc.returncode, code, f"stdout: {proc.stdout}\nstderr: {proc.stderr}")
        first = proc.stderr.splitlines()[0] if proc.stderr else ""
        self.assertTrue(first.startswith("compile.py: error: "), f"stderr: {proc.stderr}")
        for needle in needles:
            self.assertIn(needle, first)
        self.assertEqual(proc.stdout, "")
        self.assertFalse(os.path.exists(os.path.join(self.out, "kernel.json")))
        self.assertFalse(os.path.exists(os.path.join(self.out, "kernel.cubin")))


class SoftmaxCompiles(CompileTestCase):

    def test_softmax_compiles_to_an_sm90a_cubin_with_its_launch_abi_for_each_dtype(self):
        for dtype in ("fp16", "bf16", "fp32"):
            with self.subTest(dtype=dtype):
                out = os.path.join(self.out, dtype)
                proc = run_compile("--source", SOFTMAX, "--kernel", "softmax_kernel", "--signature",
                                   softmax_signature(dtype), "--constexpr", "BLOCK=1024", "--num-warps", "4",
                                   "--num-stages", "3", "--arch", "90", "--out-dir", out)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                with open(os.path.join(out, "kernel.cubin"), "rb") as f:
                    cubin = f.read()
                self.assertEqual(cubin[:4], b"\x7fELF")
                self.assertEqual(struct.unpack_from("<H", cubin, 18)[0], EM_CUDA)
                with open(os.path.join(out, "kernel.json")) as f:
                    info = json.load(f)
                self.assertEqual(info["format"], 1)
                self.assertEqual(info["kernel"], "softmax_kernel")
                self.assertEqual(info["name"], "softmax_kernel")
                self.assertIn(info["name"].encode() + b"\0", cubin)  # the symbol cuModuleGetFunction looks up
                self.assertEqual(info["arch"], 90)
                self.assertEqual(info["gpu_name"], "sm_90a")
                self.assertEqual(info["num_warps"], 4)
                self.assertEqual(info["block"], [128, 1, 1])
                self.assertEqual(info["cluster"], [1, 1, 1])
                self.assertIsInstance(info["shared_bytes"], int)
                self.assertTrue(0 <= info["shared_bytes"] <= 48 * 1024)
                self.assertEqual(info["global_scratch_bytes"], 0)
                self.assertEqual(info["profile_scratch_bytes"], 0)
                self.assertFalse(info["launch_cooperative_grid"])
                self.assertFalse(info["launch_pdl"])
                self.assertEqual(info["constexprs"], {"BLOCK": 1024})
                self.assertEqual(info["divisible_by_16"], [])
                params = info["params"]
                self.assertEqual([p["name"] for p in params],
                                 ["x_ptr", "y_ptr", "rows", "cols", "global_scratch", "profile_scratch"])
                self.assertEqual([p["kind"] for p in params],
                                 ["pointer", "pointer", "scalar", "scalar", "global_scratch", "profile_scratch"])
                self.assertEqual([p["type"] for p in params[:4]], [f"*{dtype}", f"*{dtype}", "i64", "i64"])
                self.assertTrue(all(p["bytes"] == 8 for p in params), params)
                self.assertGreater(info["compile_ms"], 0)

    def test_constexpr_default_and_single_kernel_are_found_without_flags(self):
        src = self.write_source("k.py", """
            import triton
            import triton.language as tl

            @triton.jit
            def scale(x_ptr, n, BLOCK: tl.constexpr = 256):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                m = offs < n
                tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)
            """)
        proc = run_compile("--source", src, "--signature", "x_ptr:*fp32,n:i32", "--num-warps", "2", "--out-dir",
                           self.out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(os.path.join(self.out, "kernel.json")) as f:
            info = json.load(f)
        self.assertEqual(info["name"], "scale")
        self.assertEqual(info["constexprs"], {"BLOCK": 256})
        self.assertEqual(info["block"], [64, 1, 1])
        # an i32 stays 4 bytes in the cubin: the harness's 8-byte slot is read by its low half
        self.assertEqual([(p["name"], p["bytes"]) for p in info["params"]],
                         [("x_ptr", 8), ("n", 4), ("global_scratch", 8), ("profile_scratch", 8)])

    def test_divisibility_is_assumed_only_when_asked(self):
        plain = os.path.join(self.out, "plain")
        aligned = os.path.join(self.out, "aligned")
        common = ["--source", SOFTMAX, "--signature", softmax_signature("fp16"), "--constexpr", "BLOCK=1024",
                  "--keep-ir"]
        proc = run_compile(*common, "--out-dir", plain)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        proc = run_compile(*common, "--divisible", "x_ptr", "--divisible", "y_ptr", "--divisible", "cols",
                           "--out-dir", aligned)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(os.path.join(plain, "kernel.ptx")) as f:
            plain_ptx = f.read()
        with open(os.path.join(aligned, "kernel.ptx")) as f:
            aligned_ptx = f.read()
        self.assertNotIn("ld.global.v4", plain_ptx)  # element-wise loads: valid at any alignment
        self.assertIn("ld.global.v4", aligned_ptx)
        with open(os.path.join(aligned, "kernel.json")) as f:
            self.assertEqual(json.load(f)["divisible_by_16"], ["cols", "x_ptr", "y_ptr"])


class CompileFailures(CompileTestCase):

    def test_missing_source_file_exits_3(self):
        proc = run_compile("--source", os.path.join(self.tmp.name, "nope.py"), "--signature", "x:*fp32",
                           "--out-dir", self.out)
        self.assert_fails(proc, 3, "not found", "nope.py")

    def test_syntax_error_exits_3_with_the_line(self):
        src = self.write_source("bad.py", """
            import triton

            @triton.jit
            def k(x_ptr):
                y = (x_ptr +
            """)
        proc = run_compile("--source", src, "--kernel", "k", "--signature", "x_ptr:*fp32", "--out-dir", self.out)
        self.assert_fails(proc, 3, "syntax error", "bad.py:6")

    def test_missing_kernel_exits_4_and_names_the_kernels_there(self):
        proc = run_compile("--source", SOFTMAX, "--kernel", "no_such_kernel", "--signature",
                           softmax_signature("fp16"), "--out-dir", self.out)
        self.assert_fails(proc, 4, "no_such_kernel", "softmax_kernel")

    def test_triton_compile_error_exits_5_with_the_place_and_message(self):
        src = self.write_source("broken.py", """
            import triton
            import triton.language as tl

            @triton.jit
            def k(x_ptr, BLOCK: tl.constexpr):
                offs = tl.arange(0, BLOCK)
                tl.store(x_ptr + offs, tl.load(x_ptr + offs) + not_defined)
            """)
        proc = run_compile("--source", src, "--signature", "x_ptr:*fp32", "--constexpr", "BLOCK=128", "--out-dir",
                           self.out)
        self.assert_fails(proc, 5, "broken.py:8:", "not_defined")

    def test_bad_signatures_exit_2(self):
        cases = {
            "x_ptr:*fp16,y_ptr:*fp99,rows:i64,cols:i64": "unknown type",
            "x_ptr:*fp16,y_ptr:*fp16,rows:i64": "missing",
            "x_ptr:*fp16,rows:i64,y_ptr:*fp16,cols:i64": "order",
            "x_ptr:*fp16,y_ptr:*fp16,rows:i64,cols:i64,extra:i32": "no parameter",
            "x_ptr,y_ptr": "name:type",
        }
        for sig, needle in cases.items():
            with self.subTest(signature=sig):
                proc = run_compile("--source", SOFTMAX, "--signature", sig, "--constexpr", "BLOCK=1024",
                                   "--out-dir", self.out)
                self.assert_fails(proc, 2, needle)

    def test_constexpr_without_value_exits_2(self):
        proc = run_compile("--source", SOFTMAX, "--signature", softmax_signature("fp16"), "--out-dir", self.out)
        self.assert_fails(proc, 2, "BLOCK")

    def test_a_failed_compile_leaves_no_previous_artefact_behind(self):
        ok = run_compile("--source", SOFTMAX, "--signature", softmax_signature("fp32"), "--constexpr", "BLOCK=256",
                         "--out-dir", self.out)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        proc = run_compile("--source", SOFTMAX, "--kernel", "gone", "--signature", softmax_signature("fp32"),
                           "--constexpr", "BLOCK=256", "--out-dir", self.out)
        self.assert_fails(proc, 4, "gone")


if __name__ == "__main__":
    unittest.main(verbosity=2)
