"""The runtime companion: every rule's bad and fixed programs run, and each check
shows the documented difference (`ptlint verify`)."""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ptlint.verify import checks, compare, model  # noqa: E402
from ptlint.cli import main as cli_main  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
MISSION = ("PTL001", "PTL002", "PTL003", "PTL004", "PTL005", "PTL101", "PTL102")
FAST = ("--min-time", "0.05", "--timeout", "180")
CUDA = torch.cuda.is_available()


def ptlint(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`ptlint ARGS` in this process (torch is imported here already; each
    version still runs in its own worker process)."""
    out, err = io.StringIO(), io.StringIO()
    here = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli_main(list(args))
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def rows(proc: subprocess.CompletedProcess) -> dict[str, dict]:
    """Rows by rule; a row whose fixed version ran under torchrun as "PTLnnn xN"."""
    assert proc.stdout.strip(), proc.stderr
    out = {}
    for row in json.loads(proc.stdout)["checks"]:
        n = row["fixed"]["processes"]
        out[row["rule"] if n == 1 else f"{row['rule']} x{n}"] = row
    return out


# -- every mission rule on CPU (one run, shared) ----------------------------------
@pytest.fixture(scope="module")
def cpu_run() -> subprocess.CompletedProcess:
    return ptlint("verify", "--device", "cpu", "--output-format", "json", "-j", "2", *FAST)


def test_every_check_passes_on_cpu(cpu_run):
    found = rows(cpu_run)
    assert set(MISSION) <= set(found), "a mission rule has no runnable pair"
    failed = {code: (row["detail"], row["bad"]["error"], row["fixed"]["error"])
              for code, row in found.items() if not row["passed"]}
    assert not failed, failed
    assert cpu_run.returncode == 0, cpu_run.stderr


def test_every_check_passes_with_generic_kernels_on_two_threads():
    """Another processor, as far as one machine can show it: ATen's generic kernels
    (ATEN_CPU_CAPABILITY=default) instead of this processor's vectorised ones, and
    two threads per process instead of one; the checks are judged the same."""
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    proc = subprocess.run([sys.executable, "-m", "ptlint", "verify", "--no-timing", "--threads",
                           "2", "-j", "2", "--timeout", "180", "--output-format", "json"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    found = rows(proc)
    failed = {code: row["detail"] for code, row in found.items() if not row["passed"]}
    assert not failed and proc.returncode == 0, (failed, proc.stderr[-2000:])
    assert json.loads(proc.stdout)["threads"] == 2 and set(MISSION) <= set(found)


@pytest.mark.parametrize("code", MISSION)
def test_both_versions_timed_and_measured(cpu_run, code):
    row = rows(cpu_run)[code]
    assert row["device"] == "cpu"
    for version in ("bad", "fixed"):
        v = row[version]
        assert v["error"] is None, v["error"]
        assert v["time"]["median"] > 0 and v["time"]["runs"] >= 1
        assert v["memory"] and v["memory"][0]["params"] == {}
    speed = row["speed"]  # bad and fixed timed in turns, 5 rounds
    assert speed["rounds"] == 5 and speed["low"] <= speed["ratio"] <= speed["high"]
    assert row["ratio"] == speed["ratio"]
    assert len(row["bad"]["time"]["samples"]) == len(row["fixed"]["time"]["samples"]) == 5
    claim = ("faster" if speed["low"] > 1 else "slower" if speed["high"] < 1
             else "no measurable difference")
    assert speed["claim"] == claim
    assert [text for label, text in row["facts"] if label == "time"][0].startswith(
        {"faster": "fixed is ", "slower": "fixed is ",
         "no measurable difference": "no measurable difference (bad / fixed "}[claim])


def test_ptl001_memory_grows_with_steps_only_in_bad(cpu_run):
    row = rows(cpu_run)["PTL001"]
    bad = [p for p in row["bad"]["memory"] if "steps" in p["params"]]
    fixed = [p for p in row["fixed"]["memory"] if "steps" in p["params"]]
    assert [p["params"]["steps"] for p in bad] == [8, 16, 32]
    assert bad[-1]["peak"] - bad[0]["peak"] > 4 * max(fixed[-1]["peak"] - fixed[0]["peak"], 0)
    assert bad[-1]["peak"] - bad[0]["peak"] > 24 * 32 * 1024  # at least 32 KiB per extra step
    assert "linearly" in row["detail"]


def test_ptl003_has_a_hand_written_reference(cpu_run):
    row = rows(cpu_run)["PTL003"]
    assert row["reference"] is not None and row["reference"]["error"] is None
    assert "hand-written" in row["detail"]


def test_ptl101_states_the_cpu_ratio_honestly(cpu_run):
    assert "ratio stays near 1" in rows(cpu_run)["PTL101"]["note"]


def test_ptl102_fixed_runs_with_plain_python_and_under_torchrun(cpu_run):
    plain, torchrun = rows(cpu_run)["PTL102"], rows(cpu_run)["PTL102 x2"]
    assert plain["bad"]["processes"] == torchrun["bad"]["processes"] == 1
    assert plain["fixed"]["processes"] == 1 and torchrun["fixed"]["processes"] == 2
    # one run of the original, judged twice (the plain row times it against its fixed twin)
    assert {k: v for k, v in plain["bad"].items() if k != "time"} == \
        {k: v for k, v in torchrun["bad"].items() if k != "time"}
    for row, mode in ((plain, "plain python"), (torchrun, "torchrun x2")):
        assert row["passed"], row["detail"]
        assert row["detail"].startswith(f"{mode}: loaded the original's checkpoint (`module.` "
                                        "kept); parameters equal"), row["detail"]
    assert "torchrun --nproc_per_node=2" in torchrun["note"]
    assert "torchrun" not in plain["note"].split("; ", 1)[-1]
    assert plain["speed"]["rounds"] == 5 and torchrun["speed"] is None
    assert torchrun["ratio"] is None  # two processes on the cores one uses: not comparable
    time = [text for label, text in torchrun["facts"] if label == "time"]
    assert time and time[0].endswith("not a meaningful comparison on CPU, without 2 GPUs")


def test_ptl102_a_fix_that_drops_the_wrapper_fails(tmp_path):
    """The fix this rule used to make (`... else net`): a plain `python` run then
    cannot load the original's checkpoint (its keys lost the `module.` prefix)."""
    folder = tmp_path / "fixtures" / "PTL102_data_parallel"
    shutil.copytree(ROOT / "fixtures" / "PTL102_data_parallel", folder)
    (tmp_path / "runtime_checks").mkdir()
    shutil.copy(HERE / "ptl102.py", tmp_path / "runtime_checks" / "ptl102.py")
    fixed = folder / "fixed.py"
    text = fixed.read_text()
    wrap = "else nn.DataParallel(net)  # expect: PTL102"
    assert wrap in text
    fixed.write_text(text.replace(wrap, "else net  # expect: PTL102"))
    proc = ptlint("verify", "PTL102", "--root", str(tmp_path), "--output-format", "json",
                  "--no-timing", "-j", "2", "--timeout", "180")
    assert proc.returncode == 1
    plain, torchrun = rows(proc)["PTL102"], rows(proc)["PTL102 x2"]
    assert not plain["passed"] and "Missing key(s) in state_dict" in plain["fixed"]["error"]
    assert torchrun["passed"], torchrun["detail"]  # under torchrun DDP keeps the prefix


def test_the_ptl102_fixture_itself_is_used():
    assert checks.rule_pairs(ROOT)["PTL102"][1] == ROOT / "fixtures" / "PTL102_data_parallel"


# -- a check that must fail does fail ------------------------------------------------
def test_a_wrong_fix_fails_the_check(tmp_path):
    """A "fixed" file that does not fix (PTL004) and one that crashes: exit 1,
    both FAILED, with the reason in the report."""
    shutil.copytree(ROOT / "fixtures" / "PTL004_zero_grad_before_step",
                    tmp_path / "fixtures" / "PTL004_zero_grad_before_step")
    folder = tmp_path / "fixtures" / "PTL004_zero_grad_before_step"
    shutil.copy(folder / "bad.py", folder / "fixed.py")  # the fix "forgot" to move zero_grad
    (tmp_path / "runtime_checks").mkdir()
    shutil.copy(HERE / "ptl004.py", tmp_path / "runtime_checks" / "ptl004.py")
    crash = tmp_path / "fixtures" / "PTL999_crashes"
    crash.mkdir()
    (crash / "bad.py").write_text("def main(device='cpu'):\n    return {'x': 1.0}\n")
    (crash / "fixed.py").write_text("def main(device='cpu'):\n    raise RuntimeError('boom')\n")

    proc = ptlint("verify", "--root", str(tmp_path), "--no-timing", "-j", "2",
                  "--timeout", "180")
    assert proc.returncode == 1, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "0 passed, 2 failed" in out
    assert ("PTL004 zero-grad-before-step: FAILED on cpu compared weight change in 3 training "
            "loops, and the loss found bad weights unchanged in every loop") in out
    assert "fixed weights moved by 0, 0, 0" in out
    assert "PTL999 crashes: FAILED on cpu" in out
    assert "found fixed failed: RuntimeError: boom" in out
    assert "Traceback" in proc.stdout


def test_a_version_that_runs_too_long_is_stopped(tmp_path):
    folder = tmp_path / "fixtures" / "PTL999_sleeps"
    folder.mkdir(parents=True)
    (tmp_path / "runtime_checks").mkdir()
    (folder / "bad.py").write_text("def main(device='cpu'):\n    return {'x': 1.0}\n")
    (folder / "fixed.py").write_text("import time\n\n\ndef main(device='cpu'):\n"
                                     "    time.sleep(600)\n")
    proc = ptlint("verify", "--root", str(tmp_path), "--output-format", "json", "--no-timing",
                  "--timeout", "5")
    assert proc.returncode == 1
    row = rows(proc)["PTL999"]
    assert not row["passed"] and row["fixed"]["error"] == "timed out after 5 s"
    assert row["fixed"]["wall_s"] < 60


def test_fresh_interpreters_without_the_fork_server():
    """The path CUDA runs take: each version in a new `python -m ptlint.verify.worker`."""
    proc = ptlint("verify", "PTL101", "--no-fork", "--no-timing", "--output-format", "json",
                  "-j", "2", "--timeout", "180")
    assert proc.returncode == 0, proc.stderr
    row = rows(proc)["PTL101"]
    assert row["passed"] and row["bad"]["time"] is None
    assert row["fixed"]["peak_bytes"] is not None


def test_results_that_differ_fail_the_default_check():
    bad = model.Version("bad", "bad.py", "cpu", result={"x": torch.arange(3.0)})
    fixed = model.Version("fixed", "fixed.py", "cpu", result={"x": torch.arange(3.0) + 1})
    passed, detail = model.Spec("PTL998").compare(bad, fixed, None)
    assert not passed and detail == ("results differ: x[0]: |diff| 1 (0 vs 1); tolerance 0.0003 "
                                     "= rtol 0.0001 x max |value| 3 + atol 1e-06")
    assert model.Spec("PTL998").compare(bad, bad, None)[0]


# -- a user's own script ---------------------------------------------------------------
USER_SCRIPT = """\
import torch
import torch.nn as nn


def main(device="cpu"):
    torch.manual_seed(0)
    net = nn.Linear(4, 2).to(device)
    model = nn.DataParallel(net)
    return {"out": model(torch.ones(3, 4, device=device))}
"""


def test_verify_a_user_script_leaves_it_untouched(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(USER_SCRIPT)
    before = (script.read_bytes(), script.stat().st_mtime_ns, sorted(os.listdir(tmp_path)))
    proc = ptlint("verify", str(script), "--output-format", "json", *FAST, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    row = rows(proc)["PTL102"]
    assert row["passed"] and row["name"] == "train.py"
    assert row["bad"]["path"] == str(script) and row["fixed"]["path"] != str(script)
    assert row["bad"]["time"] and row["fixed"]["time"]
    assert (script.read_bytes(), script.stat().st_mtime_ns, sorted(os.listdir(tmp_path))) == before


def test_user_script_with_nothing_to_fix(tmp_path, capsys):
    script = tmp_path / "clean.py"
    script.write_text("def main(device='cpu'):\n    return {'x': 1}\n")
    assert cli_main(["verify", str(script)]) == 0
    assert "nothing to fix" in capsys.readouterr().err


# -- usage ------------------------------------------------------------------------------
def test_unknown_rule_is_an_error(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert cli_main(["verify", "PTL900"]) == 2
    assert "PTL900 has no runnable" in capsys.readouterr().err


@pytest.mark.skipif(CUDA, reason="CUDA is available here")
def test_cuda_without_cuda_is_an_error(capsys):
    assert cli_main(["verify", "--device", "cuda"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err


def test_verify_without_torch_is_a_clear_error():
    code = ("import sys; sys.modules['torch'] = None\n"
            "from ptlint.cli import main\nsys.exit(main(['verify']))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    assert "needs torch: pip install torch, or install ptlint with its extra" in proc.stderr


def test_the_linter_core_never_imports_torch():
    code = ("import sys\nfrom ptlint.cli import build_parser, main\nbuild_parser()\n"
            "main(['check', '--no-cache', '-q', 'fixtures/PTL102_data_parallel/bad.py'])\n"
            "print('torch' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.stdout.strip().splitlines()[-1] == "False", proc.stderr


# -- helpers and the stand-in pairs ---------------------------------------------------------
def test_max_diff_and_allclose():
    a = {"p": [torch.ones(2), torch.zeros(3)], "loss": 1.0}
    b = {"p": [torch.ones(2), torch.zeros(3) + 1e-3], "loss": 1.0}
    assert compare.max_diff(a, a) == (0.0, "")
    worst, where = compare.max_diff(a, b)
    assert worst == pytest.approx(1e-3) and where == "p[1][0]"
    assert compare.allclose(a, b, atol=1e-2) and not compare.allclose(a, b)
    assert compare.max_diff(a, {"p": [torch.ones(2)], "loss": 1.0})[0] == float("inf")
    assert compare.max_diff({"x": torch.ones(2)}, {"x": torch.ones(3)})[0] == float("inf")


def test_growth_per_step():
    points = [(n, model.MemoryPoint({"steps": n}, None, 100 * n + 7, 0)) for n in (8, 16, 32)]
    assert compare.growth_per_step(points) == pytest.approx(100)
    assert compare.growth_per_step(points[:1]) is None


def test_runtime_programs_win_over_fixtures(tmp_path):
    for parent in ("fixtures", "runtime_checks/programs"):
        folder = tmp_path / parent / "PTL004_zero_grad_before_step"
        folder.mkdir(parents=True)
        for name in ("bad.py", "fixed.py"):
            (folder / name).write_text("def main(device='cpu'):\n    return {}\n")
    not_runnable = tmp_path / "fixtures" / "PTL005_backward_inside_autocast"
    not_runnable.mkdir()
    (not_runnable / "bad.py").write_text("x = 1\n")
    (not_runnable / "fixed.py").write_text("x = 1\n")
    pairs = checks.rule_pairs(tmp_path)
    assert pairs == {"PTL004": ("zero-grad-before-step",
                                tmp_path / "runtime_checks" / "programs" / "PTL004_zero_grad_before_step")}


@pytest.mark.parametrize("folder", sorted((HERE / "programs").glob("PTL*")), ids=lambda p: p.name)
def test_runtime_programs_are_what_the_rule_flags_and_fixes(folder):
    from ptlint.config import Settings, validate
    from ptlint.engine.fix import fix_text
    from ptlint.engine.lint import lint_text

    code = folder.name.split("_")[0]
    bad = (folder / "bad.py").read_text()
    fixed = (folder / "fixed.py").read_text()
    settings = Settings(select=[code])
    validate(settings)
    expected = {i for i, line in enumerate(bad.splitlines(), 1) if f"# expect: {code}" in line}
    assert expected and {f.span.start.line for f in lint_text(bad, "bad.py", settings).findings} == expected
    assert fix_text(bad, "bad.py", settings, unsafe=True).text == fixed
    assert checks.defines_main(folder / "bad.py") and checks.defines_main(folder / "fixed.py")


# -- GPU -------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_every_check_passes_on_cuda():
    proc = ptlint("verify", "--device", "cuda", "--output-format", "json", *FAST)
    found = rows(proc)
    assert not {code: row["detail"] for code, row in found.items() if not row["passed"]}
    assert proc.returncode == 0
    info = json.loads(proc.stdout)
    assert info["device"] == "cuda" and info["gpu"]
    assert found["PTL101"]["device"] == "cuda"
    assert found["PTL001"]["bad"]["memory"][-1]["retained"] > 0
    # timed in interleaved rounds, each round CUDA-synchronised by the Timer
    speed = found["PTL005"]["speed"]
    assert speed["rounds"] == 5 and speed["low"] <= speed["ratio"] <= speed["high"]


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_auto_picks_cuda_when_available():
    proc = ptlint("verify", "PTL101", "--device", "auto", "--output-format", "json", *FAST)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["device"] == "cuda"


def test_a_torchrun_rank_killed_on_its_way_out_is_run_once_more(tmp_path, monkeypatch):
    """torchrun's gloo ranks sometimes abort at shutdown, after the metrics are
    written: the run is tried once more (a crash of the machinery, not of the
    program), and the program's own error is never retried."""
    from ptlint.verify import run as verify_run

    metrics = tmp_path / "m.json"
    calls = []

    def fake(cmd, env, workdir, timeout):
        calls.append(cmd)
        metrics.write_text(json.dumps({"result": len(calls)}))
        if len(calls) == 1:
            return 1, "Signal 6 (SIGABRT) received by PID 12156"
        return 0, ""

    monkeypatch.setattr(verify_run, "_run_subprocess", fake)
    job = {"metrics": str(metrics)}
    got = verify_run._launch(job, tmp_path / "stem", "cpu", 2, verify_run.Options(fork=False))
    assert got == {"result": 2} and len(calls) == 2

    calls.clear()

    def failing(cmd, env, workdir, timeout):
        calls.append(cmd)
        metrics.write_text(json.dumps({"error": "RuntimeError: boom"}))
        return 1, "Signal 6 (SIGABRT) received by PID 1"

    monkeypatch.setattr(verify_run, "_run_subprocess", failing)
    with pytest.raises(verify_run._RunError, match="boom"):
        verify_run._launch(job, tmp_path / "stem", "cpu", 2, verify_run.Options(fork=False))
    assert len(calls) == 1
