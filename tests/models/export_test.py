"""Tests of `autokernel export --hf` (cli/model_command.cc, models/export_hf.py, models/export/).

  python3 tests/models/export_test.py --autokernel BIN [--gpu]
      CPU (ctest: models_export): the package is written from starter kernels given as tuned
      entries (compiled here for sm_90a: NVRTC and Triton need no GPU), built, imported; every
      operator is registered with its schema and falls back to PyTorch's op off the GPU; bad input
      ends with a clear error.
      --gpu (ctest: models_export_gpu, label gpu; exit 77 without a device): the same package on the
      device, where each exported kernel runs for its exact shape and matches an fp32 reference.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

import torch

GPU = "--gpu" in sys.argv
AUTOKERNEL = sys.argv[sys.argv.index("--autokernel") + 1] if "--autokernel" in sys.argv else "autokernel"
ENV = dict(os.environ, AK_PYTHON=sys.executable)


def starter(kernel_type, backend):
    p = subprocess.run([AUTOKERNEL, "starter", kernel_type, "--backend", backend], capture_output=True, text=True,
                       check=True)
    return p.stdout


def entry(kernel_type, backend, shape, dtype, config=None, speedup=1.5, gpu_model="NVIDIA H200", latency=10.0):
    return {"kernel_type": kernel_type, "backend": backend, "gpu_model": gpu_model, "dtype": dtype, "shape": shape,
            "config": config or {}, "latency_us": latency, "baseline_us": latency * speedup, "speedup": speedup,
            "source": starter(kernel_type, backend), "provenance": {"job_id": f"{kernel_type}-{backend}", "arch": "sm_90a"}}


def tuned_file(folder, entries):
    path = os.path.join(folder, "tuned.json")
    with open(path, "w") as f:
        json.dump({"format": 1, "exported_wall_ms": 0, "entries": entries}, f)
    return path


def export(folder, tuned, *extra):
    return subprocess.run([AUTOKERNEL, "export", "--hf", folder, "--tuned", tuned, *extra], capture_output=True,
                          text=True, env=ENV, timeout=900)


TRITON_SOFTMAX = {"BLOCK": 2048, "AK_NUM_WARPS": 8, "AK_NUM_STAGES": 1}


class Package(unittest.TestCase):
    """One package written and built for all the tests of this class."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = os.path.join(cls.tmp.name, "pkg")
        cls.entries = [
            entry("softmax", "cuda", [64, 1024], "bf16"),
            entry("softmax", "triton", [256, 4096], "bf16", TRITON_SOFTMAX),
            entry("rmsnorm", "cuda", [128, 2048], "fp16"),
            entry("matmul", "cuda", [256, 512, 128], "bf16"),
            entry("layernorm", "cuda", [32, 768], "fp32"),
            # The same norm at BERT's eps: a type of its own, chosen by the operator's eps.
            entry("layernorm_e12", "cuda", [32, 768], "fp32"),
            # Slower than PyTorch's op where tuned: left out.
            entry("softmax", "cuda", [512, 512], "bf16", speedup=0.9),
            # A CPU kernel: never in a package.
            entry("softmax", "cpu", [64, 64], "fp32", gpu_model="cpu"),
        ]
        cls.result = export(cls.dir, tuned_file(cls.tmp.name, cls.entries), "--build")
        variants = glob.glob(os.path.join(cls.dir, "build", "torch*"))
        cls.variant = variants[0] if len(variants) == 1 else None

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def python(self, code):
        """Runs code in a fresh Python with the built package importable as `k`; returns its last line as JSON."""
        prelude = f"import sys, json, torch\nsys.path.insert(0, {self.variant!r})\nimport autokernel_tuned as k\n"
        p = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        return json.loads(p.stdout.strip().splitlines()[-1])

    def test_the_export_says_what_it_left_out_and_builds(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr[-3000:])
        self.assertIn("no faster than PyTorch's op where it was tuned (0.900x", self.result.stderr)
        self.assertIn("package autokernel_tuned (6 kernels, sm_90a)", self.result.stdout)
        self.assertIsNotNone(self.variant)
        self.assertRegex(os.path.basename(self.variant), r"^torch\d+-cxx11-cu\d+-x86_64-linux$")
        self.assertEqual(os.listdir(os.path.join(self.dir, "build")), [os.path.basename(self.variant)],
                         "build/ holds the variant only")
        for f in ("build.toml", "build.py", "README.md", "package.json", "csrc/entries.cc", "csrc/entries.h",
                  "torch-ext/torch_binding.cpp", "torch-ext/registration.h", "torch-ext/autokernel_tuned/__init__.py"):
            self.assertTrue(os.path.exists(os.path.join(self.dir, f)), f)
        for f in ("__init__.py", "_ops.py", "_entries.py", "metadata.json", "autokernel_tuned/__init__.py"):
            self.assertTrue(os.path.exists(os.path.join(self.variant, f)), f)
        with open(os.path.join(self.dir, "build.toml")) as f:
            toml = f.read()
        self.assertIn('cuda-capabilities = ["9.0"]', toml)

    def test_a_second_export_replaces_the_package_and_leaves_nothing_beside_it(self):
        folder = os.path.join(self.tmp.name, "again")
        tuned = tuned_file(self.tmp.name, [entry("softmax", "cuda", [64, 1024], "bf16")])
        for _ in range(2):
            p = export(folder, tuned)
            self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        self.assertTrue(os.path.exists(os.path.join(folder, ".autokernel-export")))
        self.assertEqual(sorted(x for x in os.listdir(self.tmp.name) if x.startswith("again")), ["again"])

    def test_hugging_faces_kernels_loader_loads_it(self):
        """kernels.get_local_kernel (kernels 0.19, which scripts/setup.sh installs into
        $VENV/kernels-lib) reads the variant's metadata.json and imports the package."""
        lib = os.path.join(os.path.dirname(os.path.dirname(sys.executable)), "kernels-lib")
        if GPU and not os.path.isdir(os.path.join(lib, "kernels")):
            self.skipTest(f"no kernels in {lib} (the GPU machine's Python; the CPU test runs it)")
        self.assertTrue(os.path.isdir(os.path.join(lib, "kernels")), f"no kernels in {lib}: run scripts/setup.sh")
        code = ("import json, pathlib, torch\n"
                "from kernels import get_local_kernel\n"
                f"k = get_local_kernel(pathlib.Path({self.dir!r}))\n"
                "x = torch.randn(4, 8)\n"
                "print(json.dumps({'module': k.__name__, 'namespace': k.NAMESPACE, 'entries': len(k.ENTRIES),\n"
                "                  'same': torch.equal(k.softmax(x), torch.softmax(x, -1))}))\n")
        env = dict(os.environ, PYTHONPATH=lib + os.pathsep + os.environ.get("PYTHONPATH", ""))
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        got = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(got["module"], got["namespace"])
        self.assertEqual((got["entries"], got["same"]), (6, True))
        with open(os.path.join(self.variant, "metadata.json")) as f:
            meta = json.load(f)
        self.assertEqual((meta["name"], meta["backend"]), ("autokernel-tuned", {"type": "cuda", "archs": ["9.0"]}))

    def test_every_operator_has_its_schema_and_the_entries_are_listed(self):
        got = self.python(
            "ns = getattr(torch.ops, k.NAMESPACE)\n"
            "names = ['softmax', 'reduce', 'reduce_max', 'layernorm', 'rmsnorm', 'cross_entropy', 'matmul',\n"
            "         'flash_attention', 'flash_attention_causal', 'fused_mlp', 'rotary_embedding']\n"
            "print(json.dumps({'schemas': [str(getattr(ns, n).default._schema) for n in names],\n"
            "                  'eps': [getattr(ns, n).default._schema.arguments[-1].default_value for n in ('layernorm', 'rmsnorm')],\n"
            "                  'entries': sorted((e['kernel_type'], e['backend'], e['dtype']) for e in k.ENTRIES),\n"
            "                  'arch': k.ARCH, 'gpu': k.GPU_MODEL, 'calls': k.tuned_calls()}))\n")
        ns = self.python("print(json.dumps(k.NAMESPACE))")
        self.assertRegex(ns, r"^_autokernel_tuned_[0-9a-f]{7}$")
        schemas = [x.split("eps=")[0] for x in got["schemas"]]
        self.assertIn(f"{ns}::rmsnorm(Tensor x, Tensor weight, float ", schemas)
        self.assertIn(f"{ns}::layernorm(Tensor x, Tensor weight, Tensor bias, float ", schemas)
        self.assertEqual(got["eps"], [1e-5, 1e-6])
        self.assertIn(f"{ns}::fused_mlp(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down) -> Tensor", got["schemas"])
        self.assertEqual(len(got["schemas"]), 11)
        self.assertEqual(got["entries"], sorted([["softmax", "cuda", "bf16"], ["softmax", "triton", "bf16"],
                                                 ["rmsnorm", "cuda", "fp16"], ["matmul", "cuda", "bf16"],
                                                 ["layernorm", "cuda", "fp32"], ["layernorm_e12", "cuda", "fp32"]]))
        self.assertEqual((got["arch"], got["gpu"]), ("sm_90a", "NVIDIA H200"))
        self.assertEqual(sorted(got["calls"].values()), [0] * 6)

    def test_off_the_gpu_every_function_is_pytorchs_op(self):
        got = self.python(
            "import torch.nn.functional as F\n"
            "torch.manual_seed(0)\n"
            "x = torch.randn(64, 1024, dtype=torch.bfloat16)\n"
            "xs = torch.randn(2, 3, 2048, dtype=torch.float16); w = torch.randn(2048, dtype=torch.float16)\n"
            "a = torch.randn(256, 128, dtype=torch.bfloat16); b = torch.randn(128, 512, dtype=torch.bfloat16)\n"
            "q = torch.randn(1, 2, 16, 8)\n"
            "ok = [torch.equal(k.softmax(x), torch.softmax(x, -1)),\n"
            "      torch.equal(k.rms_norm(xs, w), F.rms_norm(xs, (2048,), w, 1e-6)),\n"
            "      torch.equal(k.matmul(a, b), a @ b),\n"
            "      torch.allclose(k.scaled_dot_product_attention(q, q, q, is_causal=True),\n"
            "                     F.scaled_dot_product_attention(q, q, q, is_causal=True))]\n"
            "print(json.dumps({'ok': ok, 'fallbacks': k.fallback_calls(), 'calls': sum(k.tuned_calls().values())}))\n")
        self.assertEqual(got, {"ok": [True] * 4, "fallbacks": 4, "calls": 0})

    def test_every_operator_falls_back_to_the_farms_baseline_op(self):
        """Each of the 11 operators on CPU tensors gives exactly PyTorch's op (kernels/<type>/reference.cc),
        the norms at each eps (the tuned ones' and another) too."""
        got = self.python(
            "import torch.nn.functional as F\n"
            "torch.manual_seed(0)\n"
            "ns = getattr(torch.ops, k.NAMESPACE)\n"
            "x = torch.randn(6, 40); w = torch.randn(40); b = torch.randn(40); t = torch.randint(0, 40, (6,))\n"
            "a = torch.randn(6, 8); m = torch.randn(8, 5); q = torch.randn(1, 2, 7, 8)\n"
            "wg, wu, wd = torch.randn(8, 12), torch.randn(8, 12), torch.randn(12, 8)\n"
            "r = torch.randn(5, 3, 8); c, s = torch.randn(5, 4), torch.randn(5, 4)\n"
            "rot = r * torch.cat((c, c), 1).unsqueeze(1) + torch.cat((-r[..., 4:], r[..., :4]), 2) * torch.cat((s, s), 1).unsqueeze(1)\n"
            "cases = {\n"
            " 'softmax': (ns.softmax(x), torch.softmax(x, 1)),\n"
            " 'reduce': (ns.reduce(x), x.sum(1)),\n"
            " 'reduce_max': (ns.reduce_max(x), x.amax(1)),\n"
            " 'layernorm': (ns.layernorm(x, w, b), F.layer_norm(x, (40,), w, b, 1e-5)),\n"
            " 'layernorm_e12': (ns.layernorm(x * 1e-6, w, b, 1e-12), F.layer_norm(x * 1e-6, (40,), w, b, 1e-12)),\n"
            " 'layernorm_e7': (ns.layernorm(x * 1e-3, w, b, 1e-7), F.layer_norm(x * 1e-3, (40,), w, b, 1e-7)),\n"
            " 'rmsnorm': (ns.rmsnorm(x, w), F.rms_norm(x, (40,), w, 1e-6)),\n"
            " 'rmsnorm_e5': (ns.rmsnorm(x * 1e-3, w, 1e-5), F.rms_norm(x * 1e-3, (40,), w, 1e-5)),\n"
            " 'cross_entropy': (ns.cross_entropy(x, t), F.cross_entropy(x, t, reduction='none')),\n"
            " 'matmul': (ns.matmul(a, m), a @ m),\n"
            " 'flash_attention': (ns.flash_attention(q, q, q), F.scaled_dot_product_attention(q, q, q)),\n"
            " 'flash_attention_causal': (ns.flash_attention_causal(q, q, q), F.scaled_dot_product_attention(q, q, q, is_causal=True)),\n"
            " 'fused_mlp': (ns.fused_mlp(a, wg, wu, wd), (F.silu(a @ wg) * (a @ wu)) @ wd),\n"
            " 'rotary_embedding': (ns.rotary_embedding(r, c, s), rot),\n"
            "}\n"
            "print(json.dumps({n: bool(torch.allclose(y, ref, atol=1e-5, rtol=1e-5)) for n, (y, ref) in cases.items()}))\n")
        self.assertEqual(got, {n: True for n in got})
        self.assertEqual(len(got), 14)

    def test_torch_compile_keeps_the_operators_whole_and_autograd_runs_pytorchs_op(self):
        """Each operator has a fake implementation: torch.compile(fullgraph=True) traces through the
        package's functions with the operators as nodes of its graph (where a compiled model runs
        the tuned kernels), gives PyTorch's results, and an input that needs gradients gets them
        through PyTorch's op."""
        got = self.python(
            "import torch.nn.functional as F\n"
            "torch.manual_seed(0)\n"
            "ns = getattr(torch.ops, k.NAMESPACE)\n"
            "seen = []\n"
            "def record(gm, example_inputs):\n"
            "    seen.extend(str(n.target) for n in gm.graph.nodes if n.op == 'call_function')\n"
            "    return gm.forward\n"
            "def model(x, w, b, a, m):\n"
            "    h = k.layer_norm(k.softmax(x), w, b, eps=1e-12)\n"
            "    return k.matmul(k.rms_norm(h, w), m[:40]) + k.reduce_sum(h).unsqueeze(-1), k.cross_entropy(a, a.argmax(1))\n"
            "x = torch.randn(2, 3, 40); w = torch.randn(40); b = torch.randn(40); a = torch.randn(6, 8); m = torch.randn(48, 5)\n"
            "ref = model(x, w, b, a, m)\n"
            "got = torch.compile(model, backend=record, fullgraph=True)(x, w, b, a, m)\n"
            "aot = torch.compile(model, backend='aot_eager', fullgraph=True)(x, w, b, a, m)\n"
            "# inductor checks each output's strides against the fake's: a transposed input\n"
            "xt = torch.randn(40, 6).t()\n"
            "ind = torch.compile(lambda x: ns.softmax(x) + 1, backend='inductor', fullgraph=True)(xt)\n"
            "ind_same = bool(torch.allclose(ind, torch.softmax(xt, 1) + 1))\n"
            "meta = ns.fused_mlp(*(torch.empty(s, device='meta') for s in ((7, 8), (8, 12), (8, 12), (12, 9))))\n"
            "xg = torch.randn(6, 40, requires_grad=True)\n"
            "ns.softmax(xg)[:, 0].sum().backward()\n"
            "xr = xg.detach().clone().requires_grad_(True)\n"
            "torch.softmax(xr, 1)[:, 0].sum().backward()\n"
            "ops = sorted({t.split('.')[1] for t in seen if t.startswith(k.NAMESPACE + '.')})\n"
            "print(json.dumps({'ops': ops, 'same': all(torch.allclose(p, q) for p, q in zip(got, ref)),\n"
            "                  'aot': all(torch.allclose(p, q) for p, q in zip(aot, ref)), 'inductor': ind_same,\n"
            "                  'meta': [list(meta.shape), str(meta.device)], 'grad': bool(torch.allclose(xg.grad, xr.grad))}))\n")
        self.assertEqual(got["ops"], ["cross_entropy", "layernorm", "matmul", "reduce", "rmsnorm", "softmax"], got)
        self.assertTrue(got["same"] and got["aot"] and got["inductor"], got)
        self.assertEqual(got["meta"], [[7, 9], "meta"])
        self.assertTrue(got["grad"], got)

    @unittest.skipUnless(GPU, "needs a CUDA device (--gpu)")
    def test_on_the_gpu_each_kernel_runs_for_its_shape_and_matches_the_reference(self):
        got = self.python(
            "import torch.nn.functional as F\n"
            "torch.manual_seed(0)\n"
            "dev = 'cuda'\n"
            "def err(y, ref): return float((y.float() - ref).abs().max())\n"
            "out = {}\n"
            "x = torch.randn(64, 1024, device=dev, dtype=torch.bfloat16)\n"
            "out['softmax_cuda'] = err(k.softmax(x), torch.softmax(x.float(), -1))\n"
            "x = torch.randn(256, 4096, device=dev, dtype=torch.bfloat16)\n"
            "out['softmax_triton'] = err(k.softmax(x), torch.softmax(x.float(), -1))\n"
            "x = torch.randn(128, 2048, device=dev, dtype=torch.float16); w = torch.randn(2048, device=dev, dtype=torch.float16)\n"
            "out['rmsnorm'] = err(k.rms_norm(x, w), F.rms_norm(x.float(), (2048,), w.float(), 1e-6))\n"
            "a = torch.randn(256, 128, device=dev, dtype=torch.bfloat16); b = torch.randn(128, 512, device=dev, dtype=torch.bfloat16)\n"
            "out['matmul'] = err(k.matmul(a, b), a.float() @ b.float())\n"
            "x = torch.randn(32, 768, device=dev); w = torch.randn(768, device=dev); bb = torch.randn(768, device=dev)\n"
            "out['layernorm'] = err(k.layer_norm(x, w, bb), F.layer_norm(x.double(), (768,), w.double(), bb.double(), 1e-5).float())\n"
            "# rows of variance 1e-12: BERT's eps decides the output, so only the e12 kernel matches\n"
            "x = torch.randn(32, 768, device=dev) * 1e-6\n"
            "out['layernorm_e12'] = err(k.layer_norm(x, w, bb, eps=1e-12),\n"
            "                           F.layer_norm(x.double(), (768,), w.double(), bb.double(), 1e-12).float())\n"
            "x = torch.randn(63, 1024, device=dev, dtype=torch.bfloat16)\n"
            "out['fallback'] = err(k.softmax(x), torch.softmax(x.float(), -1))\n"
            "# at an offset of one element (not 16-byte aligned): PyTorch's op\n"
            "x = torch.randn(64 * 1024 + 1, device=dev, dtype=torch.bfloat16).narrow(0, 1, 64 * 1024).view(64, 1024)\n"
            "out['offset'] = err(k.softmax(x), torch.softmax(x.float(), -1))\n"
            "# inputs that need gradients: PyTorch's op, whose output has a backward\n"
            "xg = torch.randn(64, 1024, device=dev, dtype=torch.bfloat16, requires_grad=True)\n"
            "grad = k.softmax(xg).grad_fn is not None\n"
            "# on another stream: the kernel orders with that stream's work\n"
            "s = torch.cuda.Stream()\n"
            "with torch.cuda.stream(s):\n"
            "    x = torch.randn(64, 1024, device=dev, dtype=torch.bfloat16)\n"
            "    y = k.softmax(x)\n"
            "s.synchronize()\n"
            "out['stream'] = err(y, torch.softmax(x.float(), -1))\n"
            "torch.cuda.synchronize()\n"
            "print(json.dumps({'err': out, 'calls': k.tuned_calls(), 'fallbacks': k.fallback_calls(), 'grad': grad,\n"
            "                  'device': torch.cuda.current_device()}))\n")
        print(json.dumps(got, indent=1))
        calls = dict(got["calls"])
        self.assertEqual(calls.pop("softmax 64x1024 bf16"), 2, got)  # its shape, and on the other stream
        self.assertEqual(sorted(calls.values()), [1] * 5, got)
        self.assertEqual(got["fallbacks"], 3, "another shape, an offset view, an input needing gradients")
        self.assertTrue(got["grad"])
        self.assertEqual(got["device"], 0)
        limits = {"softmax_cuda": 1e-2, "softmax_triton": 1e-2, "rmsnorm": 2e-2, "matmul": 0.25, "layernorm": 1e-4,
                  "layernorm_e12": 1e-3,
                  "fallback": 1e-2, "offset": 1e-2, "stream": 1e-2}
        for name, limit in limits.items():
            self.assertLessEqual(got["err"][name], limit, name)


class BadInput(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def test_cpu_kernels_only(self):
        p = export(os.path.join(self.tmp.name, "pkg"),
                   tuned_file(self.tmp.name, [entry("softmax", "cpu", [64, 64], "fp32", gpu_model="cpu")]))
        self.assertEqual(p.returncode, 2)
        self.assertIn("no cuda or triton kernel in", p.stderr)
        self.assertIn("cpu entries cannot be exported", p.stderr)

    def test_two_gpu_models_need_a_choice(self):
        tuned = tuned_file(self.tmp.name, [entry("softmax", "cuda", [64, 1024], "bf16"),
                                           entry("softmax", "cuda", [64, 1024], "bf16", gpu_model="NVIDIA A100")])
        p = export(os.path.join(self.tmp.name, "pkg"), tuned)
        self.assertEqual(p.returncode, 2)
        self.assertIn('kernels of 2 GPU models; name one with --gpu-model: "NVIDIA A100" "NVIDIA H200"', p.stderr)

    def test_a_folder_it_did_not_write_is_left_alone(self):
        folder = os.path.join(self.tmp.name, "mine")
        os.makedirs(folder)
        for name in ("notes.txt", "package.json"):  # a Node project's package.json is not this command's
            with open(os.path.join(folder, name), "w") as f:
                f.write("{}")
        p = export(folder, tuned_file(self.tmp.name, [entry("softmax", "cuda", [64, 1024], "bf16")]))
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("is not empty and is not a package this command wrote", p.stderr)
        self.assertEqual(sorted(os.listdir(folder)), ["notes.txt", "package.json"])

    def test_a_file_where_the_folder_should_be(self):
        path = os.path.join(self.tmp.name, "pkg")
        with open(path, "w") as f:
            f.write("x")
        p = export(path, tuned_file(self.tmp.name, [entry("softmax", "cuda", [64, 1024], "bf16")]))
        self.assertEqual(p.returncode, 2)
        self.assertIn("exists and is not a folder", p.stderr)

    def test_a_package_name_that_is_no_python_name(self):
        p = export(os.path.join(self.tmp.name, "pkg"), tuned_file(self.tmp.name, [entry("softmax", "cuda", [64, 1024], "bf16")]),
                   "--name", "My-Kernels")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--name 'My-Kernels': a Python package name", p.stderr)

    def test_a_tuned_file_that_is_no_export(self):
        path = os.path.join(self.tmp.name, "t.json")
        with open(path, "w") as f:
            f.write('{"entries": []}')
        p = export(os.path.join(self.tmp.name, "pkg"), path)
        self.assertEqual(p.returncode, 2)
        self.assertIn('expected an object with "format": 1', p.stderr)


if __name__ == "__main__":
    if GPU and not torch.cuda.is_available():
        print("no CUDA device: skipped")
        sys.exit(77)
    argv = [sys.argv[0]] + [a for a in sys.argv[1:] if a not in ("--gpu",)]
    if "--autokernel" in argv:
        i = argv.index("--autokernel")
        del argv[i:i + 2]
    unittest.main(argv=argv, verbosity=2)
