"""`ptlint verify --report FILE.html`: one self-contained page with the charts
inline, checked as data and, where Chromium is installed, in a real browser."""
from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("matplotlib")
from PIL import Image  # noqa: E402 - matplotlib's own dependency

from ptlint.verify import html as html_report  # noqa: E402
from ptlint.verify import model  # noqa: E402
from test_runtime import ROOT, ptlint  # noqa: E402

BAD, FIXED = (0xC0, 0x39, 0x2B), (0x24, 0x71, 0xA3)  # the charts' line colours
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("report") / "verify.html"
    proc = ptlint("verify", "PTL001", "--min-time", "0.05", "--rounds", "2", "--timeout", "180",
                  "--report", str(path))
    assert proc.returncode == 0, proc.stderr
    assert f"report written to {path}" in proc.stdout
    return path


def _images(text: str) -> dict[str, Image.Image]:
    return {alt: Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")
            for alt, data in re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([^"]+)"',
                                        text)}


def _has_colour(image: Image.Image, colour: tuple[int, int, int], at_least: int = 20) -> bool:
    near = sum(count for count, pixel in image.getcolors(image.width * image.height)
               if all(abs(a - b) <= 40 for a, b in zip(pixel, colour)))
    return near >= at_least


def test_the_report_is_one_self_contained_page(report):
    text = report.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "<script" not in text
    assert not re.search(r'(?:src|href)="(?!data:)', text), "it points at something outside"
    assert "PTL001 loss-kept-with-graph" in text and ">passed<" in text
    assert "bad&#x27;s peak grows" in text and "1 passed, 0 failed" in text
    assert set(_images(text)) == {"PTL001 memory over steps", "PTL001 time per round"}


def test_the_ptl001_memory_chart_shows_both_versions(report):
    chart = _images(report.read_text(encoding="utf-8"))["PTL001 memory over steps"]
    assert chart.width > 300 and chart.height > 200
    assert _has_colour(chart, BAD) and _has_colour(chart, FIXED)


def test_a_scripts_logged_steps_make_its_memory_series():
    def version(label, steps):
        run = model.ScriptRun(0, steps=steps, step_unit="batch", peak_host=400 * 2 ** 20)
        return model.Version(label, f"{label}/train.py", "cpu", run=run)

    check = model.Check("PTL001", "train.py", "train.py", Path("a"), Path("b"), model.Spec("X"))
    row = model.Row(check, "cpu", "passed", "output equal",
                    version("bad", [(0, 2 ** 20), (2, 3 * 2 ** 20)]),
                    version("fixed", [(0, 2 ** 20), (2, 2 ** 20)]))
    label, series = html_report.memory_series(row)
    assert label == "batch (as the script logs it)"
    assert series == {"bad": [(0.0, 1.0), (2.0, 3.0)], "fixed": [(0.0, 1.0), (2.0, 1.0)]}
    assert set(_images(html_report.render_html([row], "header"))) == {"PTL001 memory over steps"}


def test_report_without_matplotlib_is_a_clear_error(tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None\nfrom ptlint.cli import main\n"
            f"sys.exit(main(['verify', 'PTL001', '--report', {str(tmp_path / 'r.html')!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    assert "--report draws its charts with matplotlib: pip install matplotlib" in proc.stderr
    assert not (tmp_path / "r.html").exists()


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")
def test_chromium_renders_the_report(report, tmp_path):
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1200,1400", f"--screenshot={shot}", report.as_uri()],
                   capture_output=True, timeout=120, check=False)
    assert shot.is_file(), "Chromium wrote no screenshot"
    image = Image.open(shot).convert("RGB")
    colours = image.getcolors(image.width * image.height)
    white = sum(n for n, pixel in colours if min(pixel) > 245)
    assert white < 0.97 * image.width * image.height, "the page is blank"
    # the memory chart's two lines, as drawn in the browser
    assert _has_colour(image, BAD, 100) and _has_colour(image, FIXED, 100)
