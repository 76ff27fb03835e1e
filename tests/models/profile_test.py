"""Tests of models/profile_model.py, models/classify.py and models/model_loader.py.

  python3 tests/models/profile_test.py          CPU (ctest: models_profile)
  python3 tests/models/profile_test.py --gpu    CUDA (ctest: models_profile_gpu, label gpu; exit 77
                                                without a device)
Each profile runs as a subprocess, as a worker runs it.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROFILE = os.path.join(ROOT, "models", "profile_model.py")
sys.path.insert(0, os.path.join(ROOT, "models"))

import classify  # noqa: E402
import plug  # noqa: E402
import profile_model  # noqa: E402
import verify_model  # noqa: E402

GPU = "--gpu" in sys.argv
DEVICE = "cuda" if GPU else "cpu"


def run_profile(model, *extra, dtype=None):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "profile.json")
        args = [sys.executable, PROFILE, "--model", model, "--device", DEVICE, "--out", out, "--iters", "3",
                "--warmup", "1", "--dtype", dtype or ("bf16" if GPU else "fp32")] + list(extra)
        p = subprocess.run(args, capture_output=True, text=True, timeout=600)
        report = None
        if os.path.exists(out):
            with open(out) as f:
                report = json.load(f)
        return p, report


class Classification(unittest.TestCase):
    def test_every_gemm_op_is_matmul_with_m_n_k(self):
        self.assertEqual(classify.classify("aten::linear", [[2, 32, 64], [172, 64], [172]], None),
                         ("matmul", [64, 172, 64], {}))
        self.assertEqual(classify.classify("aten::addmm", [[172], [64, 64], [64, 172]], None),
                         ("matmul", [64, 172, 64], {}))
        self.assertEqual(classify.classify("aten::mm", [[8, 16], [16, 4]], None), ("matmul", [8, 4, 16], {}))
        self.assertEqual(classify.classify("aten::bmm", [[3, 8, 16], [3, 16, 4]], None),
                         ("matmul", [8, 4, 16], {"batch": 3}))
        self.assertEqual(classify.classify("aten::matmul", [[2, 3, 8, 16], [2, 3, 16, 4]], None),
                         ("matmul", [8, 4, 16], {"batch": 6}))

    def test_attention_says_causal_and_grouped_heads(self):
        q, kv = [1, 32, 2048, 64], [1, 4, 2048, 64]
        self.assertEqual(classify.classify("aten::scaled_dot_product_attention", [q, kv, kv, [], [], [], [], []],
                                           ["", "", "", "", "0.", "True", "", "True"]),
                         ("flash_attention_causal", q, {"kv_heads": 4}))
        self.assertEqual(classify.classify("aten::_scaled_dot_product_flash_attention", [q, q, q], [
            "", "", "", 0.0, False]), ("flash_attention", q, {}))

    def test_a_row_op_over_another_dimension_is_not_a_target(self):
        self.assertEqual(classify.classify("aten::softmax", [[4, 8, 16], [], []], ["", -1, ""]),
                         ("softmax", [32, 16], {}))
        self.assertIsNone(classify.classify("aten::softmax", [[4, 8, 16], [], []], ["", 1, ""]))
        self.assertEqual(classify.classify("aten::sum", [[4, 8], [], []], ["", [-1], False]),
                         ("reduce", [4, 8], {}))
        self.assertIsNone(classify.classify("aten::sum", [[4, 8], [], []], ["", [0, 1], False]))
        self.assertEqual(classify.classify("aten::layer_norm", [[2, 3, 768], [], [768], [768]], None),
                         ("layernorm", [6, 768], {}))
        self.assertEqual(classify.classify("aten::cross_entropy_loss", [[512, 50257], [512]], None),
                         ("cross_entropy", [512, 50257], {}))
        self.assertIsNone(classify.classify("aten::gelu", [[4, 8]], None))

    def test_a_norm_is_the_type_of_its_eps_and_says_what_else_it_differs_in(self):
        ln = [[2, 3, 768], [], [768], [768], [], []]
        self.assertEqual(classify.classify("aten::layer_norm", ln, [None, [768], None, None, 1e-5, True]),
                         ("layernorm", [6, 768], {}))
        # BERT's eps, and the same read back as an fp32 value by the profiler
        self.assertEqual(classify.classify("aten::layer_norm", ln, [None, [768], None, None, 1e-12, True]),
                         ("layernorm_e12", [6, 768], {}))
        self.assertEqual(classify.classify("aten::layer_norm", ln, [None, [768], None, None, 9.9999999600e-13, True]),
                         ("layernorm_e12", [6, 768], {}))
        self.assertEqual(classify.classify("aten::layer_norm", ln, [None, [768], None, None, "1e-06", True]),
                         ("layernorm_e6", [6, 768], {}))
        self.assertEqual(classify.classify("aten::layer_norm", ln, [None, [768], None, None, 1e-7, True]),
                         ("layernorm", [6, 768], {"eps": 1e-7}))
        self.assertEqual(classify.classify("aten::layer_norm", [[4, 64], [], [], [], [], []],
                                           [None, [64], None, None, 1e-5, True]),
                         ("layernorm", [4, 64], {"weight": False, "bias": False}))
        rms = [[4, 64], [], [64], []]
        self.assertEqual(classify.classify("aten::rms_norm", rms, [None, [64], None, 1e-6]), ("rmsnorm", [4, 64], {}))
        self.assertEqual(classify.classify("aten::rms_norm", rms, [None, [64], None, 1e-5]),
                         ("rmsnorm_e5", [4, 64], {}))
        self.assertEqual(classify.classify("aten::rms_norm", rms, [None, [64], None, 1e-8]),
                         ("rmsnorm", [4, 64], {"eps": 1e-8}))
        # eps=None is the dtype's machine epsilon, which no rmsnorm type computes with.
        self.assertEqual(classify.classify("aten::rms_norm", rms, [None, [64], None, None]),
                         ("rmsnorm", [4, 64], {"eps": "default"}))
        # the roofline of a type of another eps is its family's
        self.assertEqual(classify.flops_bytes("layernorm_e12", [6, 768], "bf16"),
                         classify.flops_bytes("layernorm", [6, 768], "bf16"))

    def test_a_rotary_op_is_the_heads_of_the_tensor_it_works_on(self):
        q = [[2, 8, 32, 16], [1, 1, 32, 16]]  # the region's first op: q * cos
        # the key's ops: k first, cos first (broadcast, 1 head), and halves (rotate_half)
        for launcher in ([[2, 2, 32, 16], [1, 1, 32, 16]], [[1, 1, 32, 16], [2, 2, 32, 16]], [[2, 2, 32, 8]],
                         [[[2, 2, 32, 8], [2, 2, 32, 8]], []]):
            self.assertEqual(classify.hint_shape("rotary_embedding", q, launcher), [64, 2, 16], launcher)
        # a multi-query key keeps its one head; an op with no 4-d input keeps the first op's heads
        self.assertEqual(classify.hint_shape("rotary_embedding", q, [[2, 1, 32, 16], [1, 1, 32, 16]]), [64, 1, 16])
        self.assertEqual(classify.hint_shape("rotary_embedding", q, [[], []]), [64, 8, 16])

    def test_roofline_intensity_follows_the_kernel_specs(self):
        flops, nbytes = classify.flops_bytes("matmul", [4096, 4096, 4096], "bf16")
        self.assertEqual(flops, 2.0 * 4096 ** 3)
        self.assertEqual(nbytes, 3 * 4096 * 4096 * 2)
        self.assertIsNone(classify.flops_bytes("other", [], "bf16"))


class Profile(unittest.TestCase):
    def check_counted_once(self, report):
        # Every activity is credited to exactly one op: the ops add up to the independently
        # measured total (the sum of all device activities; on the CPU, the top-level ops).
        total = report["total_us_per_iter"]
        self.assertGreater(total, 0)
        ops_sum = sum(o["us_per_iter"] for o in report["ops"])
        self.assertLess(abs(ops_sum + report["unattributed_us_per_iter"] - total) / total, 0.01)
        self.assertLess(report["unattributed_us_per_iter"] / total, 0.01,
                        (report["unattributed_us_per_iter"], report["unattributed_kernels"]))
        self.assertAlmostEqual(sum(o["share"] for o in report["ops"]), ops_sum / total, places=6)

    def test_each_kernel_is_counted_once_in_every_example(self):
        for model in ("examples/gpt2:tiny", "examples/llama:tiny", "examples/bert:tiny"):
            with self.subTest(model=model):
                p, report = run_profile(model, "--peak-tflops", "100", "--peak-gbps", "1000")
                self.assertEqual(p.returncode, 0, p.stderr[-2000:])
                self.check_counted_once(report)
                types = {o["kernel_type"] for o in report["ops"]}
                self.assertIn("matmul", types)
                # GEMMs are named by the outermost op (linear), never also by the addmm under it.
                self.assertFalse([o for o in report["ops"] if o["op"] in ("aten::addmm", "aten::mm")],
                                 [o["op"] for o in report["ops"]])
                self.assertTrue(all(o["bound"] in ("memory", "compute") for o in report["ops"]
                                    if o["kernel_type"] != "other"))
                self.assertIn("%", p.stdout)

    def test_berts_layer_norm_is_the_type_of_its_eps(self):
        p, report = run_profile("examples/bert:tiny")
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        norms = [t for t in report["targets"] if t["kernel_type"].startswith("layernorm")]
        self.assertTrue(norms, [t["kernel_type"] for t in report["targets"]])
        self.assertEqual({(t["kernel_type"], json.dumps(t["layout"])) for t in norms}, {("layernorm_e12", "{}")})

    def test_the_llama_profile_names_every_type_it_uses(self):
        p, report = run_profile("examples/llama:tiny")
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        by_type = {t["kernel_type"]: t for t in report["targets"]}
        for t in ("matmul", "rmsnorm_e5", "rotary_embedding", "fused_mlp", "flash_attention_causal"):
            self.assertIn(t, by_type)
        self.assertEqual(by_type["fused_mlp"]["shape"], [64, 64, 172])
        # the query (4 heads) and the key (2, grouped-query attention) are a target each
        rotary = {tuple(t["shape"]): t["share"] for t in report["targets"] if t["kernel_type"] == "rotary_embedding"}
        self.assertEqual(set(rotary), {(64, 4, 16), (64, 2, 16)})
        if GPU:  # on the CPU, two ops of 4,096 and 2,048 floats cost about the same dispatch: a coin toss
            self.assertGreater(rotary[(64, 4, 16)], rotary[(64, 2, 16)])
        self.assertTrue(all(share > 0 for share in rotary.values()), rotary)
        self.assertEqual(by_type["flash_attention_causal"]["layout"], {"kv_heads": 2})
        self.assertEqual(by_type["flash_attention_causal"]["shape"], [2, 4, 32, 16])
        self.assertEqual(by_type["rmsnorm_e5"]["layout"], {})  # the decoder's eps 1e-5 is a type of its own
        # Targets are deduplicated: one per (type, shape, dtype, layout), their shares summed.
        keys = [(t["kernel_type"], tuple(t["shape"]), t["dtype"], json.dumps(t["layout"])) for t in report["targets"]]
        self.assertEqual(len(keys), len(set(keys)))
        covered = sum(t["share"] for t in report["targets"]) + sum(u["share"] for u in report["uncovered"])
        self.assertAlmostEqual(covered, sum(o["share"] for o in report["ops"]), places=6)

    def test_a_model_that_is_not_an_example_profiles_through_the_same_command(self):
        p, report = run_profile(os.path.join(HERE, "models", "small_cnn.py"))
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        self.check_counted_once(report)
        ops = {o["op"] for o in report["uncovered"]}
        self.assertTrue(any("conv" in op for op in ops), ops)
        self.assertIn("softmax", {t["kernel_type"] for t in report["targets"]})


class DeviceAttribution(unittest.TestCase):
    """_device_activities on a profiler's lists built by hand (runs without a GPU): the collision
    that made torch's per-op kernel lists count an op's kernels twice (pytorch/pytorch#196282)."""

    class Kineto:
        def __init__(self, device, name, corr, linked, start_ns, end_ns, stream=7):
            self.d, self.n, self.c, self.l, self.s, self.e, self.r = device, name, corr, linked, start_ns, end_ns, stream

        def device_type(self): return self.d
        def name(self): return self.n
        def correlation_id(self): return self.c
        def linked_correlation_id(self): return self.l
        def start_ns(self): return self.s
        def end_ns(self): return self.e
        def device_index(self): return 0
        def device_resource_id(self): return self.r
        def is_user_annotation(self): return False
        def is_hidden_event(self): return False

    def test_an_unlinked_runtime_call_sharing_an_ops_id_takes_none_of_its_kernels(self):
        from types import SimpleNamespace as NS
        from torch.autograd import DeviceType
        K, CPU, CUDA = self.Kineto, DeviceType.CPU, DeviceType.CUDA
        t0 = 1_000_000

        def event(eid, name, start_us, end_us, parent=None):
            return NS(id=eid, name=name, device_type=CPU, is_async=False, cpu_parent=parent,
                      time_range=NS(start=start_us, end=end_us))

        # aten::mm (torch's id 5) launches gemm through cudaLaunchKernel (CUPTI's id 40, linked to 5);
        # later, outside any op, cudaDeviceSynchronize has CUPTI's id 5 and no link, and so does an
        # event of another name, one level deeper than aten::mm (what only the launch time tells apart).
        mm = event(5, "aten::mm", 10.0, 20.0)
        launch = event(40, "cudaLaunchKernel", 12.0, 13.0, parent=mm)
        outer = event(0, "synchronize", 49.0, 91.0)
        sync = event(5, "cudaDeviceSynchronize", 50.0, 60.0, parent=outer)
        other = event(5, "some_call", 80.0, 90.0, parent=outer)
        kineto = [K(CPU, "aten::mm", 5, 0, t0 + 10_000, t0 + 20_000),
                  K(CPU, "cudaLaunchKernel", 40, 5, t0 + 12_000, t0 + 13_000),
                  K(CPU, "cudaDeviceSynchronize", 5, 0, t0 + 50_000, t0 + 60_000),
                  K(CPU, "some_call", 5, 0, t0 + 80_000, t0 + 90_000),
                  K(CUDA, "gemm", 40, 5, t0 + 14_000, t0 + 44_000),
                  K(CUDA, "stray", 41, 0, t0 + 45_000, t0 + 46_000)]  # launched outside any op
        prof = NS(profiler=NS(kineto_results=NS(events=lambda: kineto, trace_start_ns=lambda: t0)))
        events = [outer, sync, other, mm, launch]
        got = {e.name: acts for e, acts in profile_model._device_activities(prof, events, kineto)}
        # the event of id 5 that holds the launch is aten::mm; the others of id 5 get nothing, and
        # the stray activity is left unattributed
        self.assertEqual(got, {"aten::mm": [("gemm", 30.0)]})
        # torch dropped the aten::copy_ nested in aten::copy_ (id 9, under id 8): its kernel goes to
        # the op around its launch
        copy = event(8, "aten::copy_", 70.0, 80.0)
        kineto += [K(CPU, "cudaLaunchKernel", 42, 9, t0 + 72_000, t0 + 73_000),
                   K(CUDA, "copy", 42, 9, t0 + 74_000, t0 + 75_000)]
        got = {e.name: acts for e, acts in profile_model._device_activities(prof, events + [copy], kineto)}
        self.assertEqual(got, {"aten::mm": [("gemm", 30.0)], "aten::copy_": [("copy", 1.0)]})


class WorkShapes(unittest.TestCase):
    def test_an_op_that_records_its_list_as_empty_is_the_tensor_of_the_op_before_it(self):
        # rotate_half(k) in a rotary region: neg on k's second half, then cat, whose list of
        # tensors the profiler records as empty shapes.
        from types import SimpleNamespace as NS

        def op(name, start, shapes):
            return NS(name=name, device_type=profile_model.DeviceType.CPU, is_async=False, cpu_children=[],
                      time_range=NS(start=start, end=start + 1), input_shapes=shapes)

        mul_q = op("aten::mul", 1, [[1, 8, 32, 16], [1, 1, 32, 16]])
        neg_k = op("aten::neg", 5, [[1, 2, 32, 8]])
        cat_k = op("aten::cat", 6, [[], []])
        later = op("aten::mul", 7, [[1, 8, 32, 16]])
        region = NS(name="ak::rotary_embedding", cpu_children=[mul_q, neg_k, cat_k, later])
        self.assertEqual(profile_model._work_shapes(region, cat_k), [[1, 2, 32, 8]])
        self.assertEqual(profile_model._work_shapes(region, mul_q), mul_q.input_shapes)


class Summary(unittest.TestCase):
    def test_a_model_of_many_small_ops_keeps_the_largest_and_sums_the_rest(self):
        # A result travels in one frame: past MAX_OPS rows the smallest ops become one row.
        groups = {i: {"op": f"aten::op{i}", "kernel_type": "other", "shape": [], "layout": {}, "dtype": "fp32",
                      "calls": 1, "us": float(i + 1), "kernels": {}} for i in range(1000)}
        total = float(sum(range(1, 1001)))
        r = profile_model.summarize(groups, total, total, 1, 0, 0)
        self.assertEqual(len(r["ops"]), profile_model.MAX_OPS)
        self.assertEqual(r["ops"][0]["op"], "aten::op999")
        self.assertEqual(r["ops"][-1]["op"], f"({1000 - profile_model.MAX_OPS + 1} smaller ops)")
        self.assertAlmostEqual(sum(o["us_per_iter"] for o in r["ops"]), total)
        self.assertLess(len(json.dumps(r)), 1 << 20)


class HuggingFace(unittest.TestCase):
    @unittest.skipUnless(importlib.util.find_spec("transformers"), "transformers is not installed "
                         "(scripts/setup.sh installs it with AK_WITH_TRANSFORMERS=1, as scripts/test.sh does)")
    def test_an_architecture_is_built_from_its_configuration_and_profiled(self):
        p, report = run_profile("hf:bert", "--iters", "1", dtype="fp32" if not GPU else None)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        self.assertEqual(report["model"], "hf:bert")
        self.assertGreater(report["parameters"], 100_000_000)  # BERT-base's default configuration
        Profile.check_counted_once(self, report)
        types = {t["kernel_type"] for t in report["targets"]}
        self.assertTrue({"matmul", "layernorm_e12"} <= types, types)  # BERT's LayerNorm, eps 1e-12
        p, report = run_profile("hf:no_such_architecture")
        self.assertEqual(p.returncode, 3)
        self.assertIn("is not a transformers architecture", report["error"])


class PlugPatterns(unittest.TestCase):
    """Which modules and functions of a model models/plug.py plugs tuned kernels into."""

    def test_an_mlp_of_three_bias_free_linears_with_silu_is_a_fused_mlp(self):
        import torch.nn as nn
        sys.path.insert(0, os.path.join(ROOT, "models", "examples"))
        import llama
        model = llama.build_model("tiny")
        mlps = [m for m in model.modules() if plug._swiglu_parts(m) is not None]
        self.assertEqual(len(mlps), 2)  # one per block of the tiny configuration

        class HfMlp(nn.Module):  # as transformers' LlamaMLP
            def __init__(self, act):
                super().__init__()
                self.gate_proj, self.up_proj = nn.Linear(8, 16, bias=False), nn.Linear(8, 16, bias=False)
                self.down_proj, self.act_fn = nn.Linear(16, 8, bias=False), act

        self.assertIsNotNone(plug._swiglu_parts(HfMlp(nn.SiLU())))
        self.assertIsNone(plug._swiglu_parts(HfMlp(nn.GELU())), "GELU is not SwiGLU")
        biased = HfMlp(nn.SiLU())
        biased.up_proj = nn.Linear(8, 16)
        self.assertIsNone(plug._swiglu_parts(biased), "a bias the kernel does not add")

    def test_the_models_own_apply_rotary_pos_emb_is_found(self):
        sys.path.insert(0, os.path.join(ROOT, "models", "examples"))
        import llama
        found = [g for g in plug._model_globals(llama.build_model("tiny")) if "apply_rotary_pos_emb" in g]
        self.assertEqual(len(found), 1)
        self.assertIs(found[0]["apply_rotary_pos_emb"], llama.apply_rotary_pos_emb)


    def test_a_rotary_half_left_to_the_original_costs_only_its_own_tensor(self):
        # A kernel tuned for the query (8 heads) but not the key (2): the key alone goes through
        # the model's function, paired with itself, and the query is not computed twice.
        sys.path.insert(0, os.path.join(ROOT, "models", "examples"))
        import llama
        q, k = torch.randn(1, 8, 4, 16), torch.randn(1, 2, 4, 16)
        cos, sin = torch.randn(4, 16), torch.randn(4, 16)
        want_q, want_k = llama.apply_rotary_pos_emb(q, k, cos, sin)
        seen = []

        def orig(a, b, c, s):
            seen.append((a.shape[1], b.shape[1]))
            return llama.apply_rotary_pos_emb(a, b, c, s)

        p = plug.Plug.__new__(plug.Plug)
        for tuned in (8, 2):  # the query's kernel, then the key's
            seen.clear()
            p._rope_one = lambda x, c, s, u, tuned=tuned: (llama.apply_rotary_pos_emb(x, x, c, s)[0]
                                                            if x.shape[1] == tuned else None)
            with torch.no_grad():
                got_q, got_k = p._rotary(orig)(q, k, cos, sin)
            torch.testing.assert_close(got_q, want_q)
            torch.testing.assert_close(got_k, want_k)
            # the key (2 heads) with itself; the query (8) with the key, the smaller partner
            self.assertEqual(seen, [(2, 2)] if tuned == 8 else [(8, 2)])


class BadInput(unittest.TestCase):
    def test_a_model_file_that_raises_on_import_names_the_file_the_line_and_the_error(self):
        path = os.path.join(HERE, "models", "raises_on_import.py")
        p, report = run_profile(path)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn(f"raised on import at {path}:3: RuntimeError: this model file is broken on purpose", report["error"])

    def test_a_model_file_without_entry_points_says_what_it_must_define(self):
        p, report = run_profile(os.path.join(HERE, "models", "no_entry_points.py"))
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("defines neither build_model() and example_inputs() nor KernelBench's Model", report["error"])

    def test_a_model_that_raises_while_running_names_the_exception(self):
        p, report = run_profile(os.path.join(HERE, "models", "raises_in_forward.py"))
        self.assertEqual(p.returncode, 5, p.stderr)
        self.assertIn("ValueError: forward refuses on purpose", report["error"])

    def test_an_unknown_example_or_configuration_lists_the_known_ones(self):
        p, report = run_profile("examples/gtp2")
        self.assertEqual(p.returncode, 3)
        self.assertIn("no example model 'gtp2'; examples: bert, gpt2, llama", report["error"])
        p, report = run_profile("examples/llama:13b")
        self.assertEqual(p.returncode, 3)
        self.assertIn("has no configuration '13b'", report["error"])

    @unittest.skipUnless(GPU, "out of GPU memory needs a GPU")
    def test_a_model_that_runs_out_of_gpu_memory_says_so(self):
        p, report = run_profile(os.path.join(HERE, "models", "huge_allocation.py"))
        self.assertEqual(p.returncode, 4, p.stderr)
        self.assertIn("ran out of GPU memory", report["error"])


class Decoding(unittest.TestCase):
    """models/verify_model.py's greedy-decoding check: free runs, then the tuned model along the
    original's tokens, where only an exact tie of the original's best logits, or a choice within the
    outputs' tolerance of it, may differ."""

    class Chain(torch.nn.Module):
        """A language model whose next token is the last one plus 1 (mod 10), except that after a 3
        the tokens 4 and 6 tie exactly; `tie_to` breaks that tie towards one of them, as a kernel
        that rounds differently may."""

        def __init__(self, tie_to=None, wrong_after=None, near_after=None):
            super().__init__()
            self.tie_to, self.wrong_after, self.near_after = tie_to, wrong_after, near_after

        def forward(self, ids):
            last = ids[:, -1]
            logits = torch.zeros(ids.shape[0], ids.shape[1], 10)
            for b, t in enumerate(last.tolist()):
                logits[b, -1, (t + 1) % 10] = 5.0
                if t == 3:
                    logits[b, -1, 6] = 5.0  # the tie
                    if self.tie_to is not None:
                        logits[b, -1, self.tie_to] = 5.0 + 1e-6
                if self.wrong_after is not None and t == self.wrong_after:
                    logits[b, -1, 0] = 9.0
                if self.near_after is not None and t == self.near_after[0]:
                    # token 0 just below the best logit: 5 - gap (the original); the tuned model
                    # passes `gap=-gap`, putting it just above
                    logits[b, -1, 0] = 5.0 - self.near_after[1]
            return logits

    def test_a_tie_of_the_original_is_the_only_difference_allowed_along_its_tokens(self):
        ids = torch.tensor([[1, 2]])
        want, margins, best, _ = verify_model._decode(self.Chain(), ids, 6)
        self.assertEqual(want[0], [3])
        self.assertEqual(best[1], [{4, 6}], "after a 3 the original's best logit is reached by 4 and 6")
        self.assertEqual(margins[1], 0.0)
        tuned = self.Chain(tie_to=4 if want[1] == [6] else 6)  # the other way from the original's
        got = verify_model._decode(tuned, ids, 6)[0]
        forced = verify_model._decode(tuned, ids, len(want), follow=want)[0]
        r = verify_model.compare_decoding(want, margins, best, got, forced)
        self.assertFalse(r["identical"])
        self.assertEqual(r["first_difference"], 1)
        self.assertEqual(r["forced"]["ties"], 1)
        self.assertEqual(r["forced"]["agree"], 5)
        self.assertTrue(r["forced"]["identical_but_ties"])
        self.assertIsNone(r["forced"]["first_difference"])

    def test_a_difference_that_is_no_tie_is_reported_at_its_token(self):
        ids = torch.tensor([[3, 4]])  # 5, 6, 7, ...: no tie on the way
        want, margins, best, steps = verify_model._decode(self.Chain(), ids, 6)
        tuned = self.Chain(wrong_after=5)  # after a 5 the tuned model says 0, the original 6
        got = verify_model._decode(tuned, ids, 6)[0]
        forced = verify_model._decode(tuned, ids, len(want), follow=want)[0]
        # The original's gap between its 6 (logit 5) and the tuned model's 0 (logit 0) is the whole
        # largest logit: far outside a tolerance of 5%.
        r = verify_model.compare_decoding(want, margins, best, got, forced, logits=steps, tolerance=0.05)
        self.assertFalse(r["forced"]["identical_but_ties"])
        self.assertEqual(want[:2], [[5], [6]])
        self.assertEqual(r["forced"]["first_difference"], 1)
        self.assertEqual(r["forced"]["near_ties"], 0)
        self.assertEqual(r["forced"]["gaps"], [{"token": 1, "batch": 0, "gap": 1.0, "near": False}])
        self.assertIsNone(r["forced"]["largest_gap"], "the largest gap is among near ties only")
        self.assertEqual(r["first_difference"], 1)

    def test_a_choice_within_the_outputs_tolerance_of_the_best_logit_is_a_near_tie_and_one_beyond_it_is_not(self):
        ids = torch.tensor([[3, 4]])  # 5, 6, 7, ...
        # After a 5 the original's 0 sits 0.1 below its 6 (gap 0.1 / 5 = 2% of the largest logit);
        # the tuned model, with an error of 0.2 there, chooses the 0.
        want, margins, best, steps = verify_model._decode(self.Chain(near_after=(5, 0.1)), ids, 6)
        tuned = self.Chain(near_after=(5, -0.1))
        got = verify_model._decode(tuned, ids, 6)[0]
        forced = verify_model._decode(tuned, ids, len(want), follow=want)[0]
        self.assertEqual(forced[1], [0])
        within = verify_model.compare_decoding(want, margins, best, got, forced, logits=steps, tolerance=0.05)
        self.assertTrue(within["forced"]["identical_but_ties"])
        self.assertEqual(within["forced"]["near_ties"], 1)
        self.assertEqual(within["forced"]["ties"], 0)
        self.assertAlmostEqual(within["forced"]["largest_gap"], 0.02, places=6)
        self.assertIsNone(within["forced"]["first_difference"])
        # With a tolerance of 1% the same gap is a real difference.
        beyond = verify_model.compare_decoding(want, margins, best, got, forced, logits=steps, tolerance=0.01)
        self.assertFalse(beyond["forced"]["identical_but_ties"])
        self.assertEqual(beyond["forced"]["near_ties"], 0)
        self.assertEqual(beyond["forced"]["first_difference"], 1)
        # Without logits only exact ties are forgiven.
        self.assertEqual(verify_model.compare_decoding(want, margins, best, got, forced)["forced"]["first_difference"], 1)


if __name__ == "__main__":
    if GPU:
        sys.argv.remove("--gpu")
        import torch
        if not torch.cuda.is_available():
            print("no CUDA device: skipped")
            sys.exit(77)
    # A failure is printed when it happens, not only at the end: a GPU session that cuts the
    # test at its time limit still shows why the subtests before the cut failed.
    class ImmediateResult(unittest.TextTestResult):
        def addFailure(self, test, err):
            super().addFailure(test, err)
            self.stream.writeln(self._exc_info_to_string(err, test))
            self.stream.flush()

        def addError(self, test, err):
            super().addError(test, err)
            self.stream.writeln(self._exc_info_to_string(err, test))
            self.stream.flush()

        def addSubTest(self, test, subtest, err):
            super().addSubTest(test, subtest, err)
            if err is not None:
                self.stream.writeln(f"{subtest}: " + self._exc_info_to_string(err, test))
                self.stream.flush()

    unittest.main(verbosity=2, testRunner=unittest.TextTestRunner(verbosity=2, resultclass=ImmediateResult))
