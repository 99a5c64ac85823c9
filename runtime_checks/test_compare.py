"""Comparing results at a tolerance scaled to each result's magnitude: rounding
differences between kernels, thread counts and processors pass; a real change
fails, with a message that says where and by how much."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ptlint.verify import compare, model  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PTL122 = ROOT / "fixtures" / "PTL122_conv_bias_before_batchnorm"


def version(label: str, result) -> model.Version:
    return model.Version(label, f"{label}.py", "cpu", result=result)


def conv_bn(bias: float | None, train: bool = True):
    """PTL122's block: a convolution (with a bias of `bias`, or none) before
    BatchNorm and a ReLU."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 8)
    conv = torch.nn.Conv2d(3, 4, 3, padding=1, bias=bias is not None)
    if bias is not None:
        with torch.no_grad():
            conv.bias.fill_(bias)
    net = torch.nn.Sequential(conv, torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    if not train:
        net.eval()
    with torch.no_grad():
        return net(x)


# -- rounding-level noise passes ---------------------------------------------------------
def test_noise_near_zero_is_judged_by_the_results_magnitude():
    """PTL122 on an AMD EPYC: 3.8e-6 on values up to 2.7, far above 1e-5 of the
    values near zero that the ReLU leaves; an element-wise test fails it."""
    a = torch.tensor([2.7, 1.3, 1e-4, 0.0, 3e-3])
    b = a + torch.tensor([3.8e-6, -2e-6, 3.8e-6, 0.0, -1e-6])
    assert not torch.allclose(a, b, rtol=1e-5, atol=1e-6)  # the old, element-wise test
    d = compare.difference({"train_output": a}, {"train_output": b})
    assert d.ok and d.result == "train_output" and d.scale == pytest.approx(2.7, rel=1e-5)
    assert compare.compare_equal(version("bad", {"y": a}), version("fixed", {"y": b}))[0]


@pytest.mark.parametrize("magnitude", [1e-6, 1e-3, 1.0, 1e3, 1e6])
def test_float32_rounding_passes_at_every_magnitude(magnitude):
    """The same sums and products computed in another order (as another kernel, or
    another number of threads, would), at every scale of the values."""
    torch.manual_seed(1)
    a, b = torch.randn(64, 256) * magnitude, torch.randn(256, 32)
    blocked = sum(a[:, i:i + 16] @ b[i:i + 16] for i in range(0, 256, 16))
    wide = (a.double() @ b.double()).float()
    assert not torch.equal(a @ b, blocked)  # the orders really round differently
    for other in (blocked, wide):
        assert compare.difference({"out": a @ b}, {"out": other}).ok
    backwards = torch.stack([r.flip(0).cumsum(0)[-1] for r in a])
    assert compare.difference(a.sum(1), backwards).ok


def test_ptl122_bad_and_fixed_agree_on_train_output():
    bad, fixed = conv_bn(5.0), conv_bn(None)
    d = compare.difference(bad, fixed)
    assert d.ok and 0 < d.diff < d.tolerance


@pytest.mark.parametrize(("capability", "threads"), [("default", 1), (None, 2)])
def test_ptl122_fixture_agrees_across_kernels_and_threads(tmp_path, capability, threads):
    """The fixture's bad.py run with the generic kernels (ATEN_CPU_CAPABILITY=default)
    or this processor's, on 1 or 2 threads, against fixed.py run the other way:
    the documented check passes in every pairing."""
    results = {}
    for label, cap, n in (("bad", capability, threads),
                          ("fixed", None if capability else "default", 3 - threads)):
        out = tmp_path / f"{label}.pt"
        env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
        env.update({"OMP_NUM_THREADS": str(n), "PYTHONWARNINGS": "ignore"})
        if cap:
            env["ATEN_CPU_CAPABILITY"] = cap
        code = ("import sys, runpy, torch\n"
                f"torch.set_num_threads({n})\n"
                "main = runpy.run_path(sys.argv[1])['main']\n"
                "torch.save(main('cpu'), sys.argv[2])\n"
                "print(torch.backends.cpu.get_cpu_capability())\n")
        proc = subprocess.run([sys.executable, "-c", code, str(PTL122 / f"{label}.py"), str(out)],
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        if cap == "default":
            assert proc.stdout.split()[-1] == "DEFAULT"
        results[label] = torch.load(out, weights_only=True)
    spec = model.Spec("PTL122", _module("ptl122"))
    passed, detail = spec.compare(version("bad", results["bad"]),
                                  version("fixed", results["fixed"]), None)
    assert passed, detail


def _module(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"test_{name}", ROOT / "runtime_checks" /
                                                  f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- a real difference fails -------------------------------------------------------------
def test_a_bias_that_batchnorm_does_not_cancel_fails():
    """In eval mode BatchNorm uses its running statistics, so the bias shows."""
    bad, fixed = conv_bn(5.0, train=False), conv_bn(None, train=False)
    d = compare.difference({"train_output": bad}, {"train_output": fixed})
    assert not d.ok and d.diff > 1
    passed, detail = compare.compare_changes(
        version("bad", {"parameters": 104.0, "train_output": bad}),
        version("fixed", {"parameters": 100.0, "train_output": fixed}),
        {"parameters": "the bias is gone"})
    assert not passed
    assert detail.startswith("an unrelated result changed: train_output[")
    assert f"|diff| {d.diff:.3g}" in detail and "tolerance" in detail


def test_a_skipped_training_step_fails():
    def train(steps: int):
        torch.manual_seed(0)
        model_ = torch.nn.Linear(8, 2)
        optimizer = torch.optim.SGD(model_.parameters(), lr=0.01)
        x, y = torch.randn(32, 8), torch.randn(32, 2)
        for _ in range(steps):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model_(x), y).backward()
            optimizer.step()
        return {"params": [p.detach().clone() for p in model_.parameters()]}

    passed, detail = compare.compare_equal(version("bad", train(20)), version("fixed", train(19)))
    assert not passed and detail.startswith("results differ: params[")


def test_the_failure_message_names_result_difference_place_and_tolerance():
    a = {"loss": 1.0, "out": torch.zeros(2, 3)}
    b = {"loss": 1.0, "out": torch.zeros(2, 3)}
    b["out"][1, 2] = 0.5
    passed, detail = compare.compare_equal(version("bad", a), version("fixed", b))
    assert not passed
    assert detail == ("results differ: out[1, 2]: |diff| 0.5 (0 vs 0.5); tolerance 5.1e-05 "
                      "= rtol 0.0001 x max |value| 0.5 + atol 1e-06")


def test_a_checks_own_tolerance_is_used():
    """RTOL/ATOL in runtime_checks/ptlNNN.py apply to the default comparison."""
    import types

    a, b = {"x": torch.tensor([1.0])}, {"x": torch.tensor([1.001])}
    assert not model.Spec("PTL998").compare(version("bad", a), version("fixed", b), None)[0]
    loose = types.SimpleNamespace(RTOL=1e-2, ATOL=0.0)
    passed, detail = model.Spec("PTL998", loose).compare(version("bad", a), version("fixed", b),
                                                          None)
    assert passed, detail


# -- what is compared exactly ------------------------------------------------------------
def test_integers_booleans_and_strings_are_exact():
    assert not compare.difference(torch.tensor([10**6]), torch.tensor([10**6 + 1])).ok
    assert not compare.difference({"n": 1000}, {"n": 1001}).ok
    assert not compare.difference(torch.tensor([True]), torch.tensor([False])).ok
    assert not compare.difference({"dtype": "float32"}, {"dtype": "float64"}).ok
    assert compare.difference({"n": 3, "s": "x", "f": None}, {"n": 3, "s": "x", "f": None}).ok


def test_nan_and_inf():
    nan, inf = float("nan"), float("inf")
    assert compare.difference(torch.tensor([nan, inf, 1.0]), torch.tensor([nan, inf, 1.0])).ok
    d = compare.difference({"x": torch.tensor([1.0, 2.0])}, {"x": torch.tensor([1.0, inf])})
    assert not d.ok and d.describe() == "x[1]: inf or nan on one side only at [1] (2 vs inf)"
    assert not compare.difference(1.0, nan).ok and compare.difference(nan, nan).ok


def test_structure_differences():
    assert not compare.difference({"x": torch.ones(2)}, {"x": torch.ones(3)}).ok
    assert not compare.difference({"x": 1.0}, {"y": 1.0}).ok
    assert not compare.difference({"x": torch.ones(1)}, {"x": 1.0}).ok
    assert compare.max_diff({"x": torch.ones(2)}, {"x": torch.ones(3)})[0] == float("inf")


def test_the_report_says_how_close_a_pass_came():
    a, b = {"x": torch.tensor([2.0, 0.0])}, {"x": torch.tensor([2.0, 1e-5])}
    passed, detail = compare.compare_equal(version("bad", a), version("fixed", b))
    assert passed and detail == "results equal (|diff| 1e-05 at x[1], within its tolerance 0.0002)"
    assert compare.compare_equal(version("bad", a), version("fixed", a))[1] == \
        "results equal (identical)"


def test_json_report_of_a_failed_comparison(tmp_path):
    """Through the command line: a pair whose fixed version really changes a result."""
    from test_runtime import ptlint, rows

    folder = tmp_path / "fixtures" / "PTL999_changes"
    folder.mkdir(parents=True)
    (tmp_path / "runtime_checks").mkdir()
    body = "import torch\n\n\ndef main(device='cpu'):\n    return {{'w': torch.arange(4.0) {}}}\n"
    (folder / "bad.py").write_text(body.format(""))
    (folder / "fixed.py").write_text(body.format("* 1.01"))
    proc = ptlint("verify", "--root", str(tmp_path), "--output-format", "json", "--no-timing",
                  "--timeout", "180")
    assert proc.returncode == 1
    row = rows(proc)["PTL999"]
    assert not row["passed"]
    assert row["detail"] == ("results differ: w[3]: |diff| 0.03 (3 vs 3.03); tolerance 0.0003 "
                             "= rtol 0.0001 x max |value| 3.03 + atol 1e-06")
    assert json.loads(proc.stdout)["passed"] is False


def test_ptl021_on_cuda_the_original_raising_is_the_documented_difference():
    """On CUDA `binary_cross_entropy` under float16 autocast raises (seen on an
    H100): bad returns `raised` 1 and a NaN loss, fixed the loss, which must
    match float32. Results shaped as a CUDA run gives them, judged on the CPU."""
    spec = model.Spec("PTL021", _module("ptl021"))
    reference = model.Version("reference", "ptl021.py", "cuda",
                              result=_module("ptl021").reference("cpu"))
    loss = reference.result["loss"]

    def run(label, loss, raised):
        return model.Version(label, f"{label}.py", "cuda",
                             result={"loss": loss, "raised": raised})

    raising = run("bad", torch.tensor(float("nan")), 1.0)
    passed, detail = spec.compare(raising, run("fixed", loss * (1 + 1e-3), 0.0), reference)
    assert passed, detail
    assert detail.startswith("bad raises (unsafe to autocast), fixed computes the loss")
    # the fixed loss must be the float32 loss, to float16's rounding
    passed, detail = spec.compare(raising, run("fixed", loss * 1.5, 0.0), reference)
    assert not passed and "fixed is not the float32 loss" in detail
    # an original that does not raise on CUDA is not what the check documents
    passed, detail = spec.compare(run("bad", loss, 0.0), run("fixed", loss, 0.0), reference)
    assert not passed and detail.startswith("expected only bad to raise")
