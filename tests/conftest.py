from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>PTL\d{3}(?:\s*,\s*PTL\d{3})*)")


def fixture_dirs() -> list[Path]:
    return sorted(p for p in FIXTURES.iterdir() if p.is_dir() and re.match(r"PTL\d{3}_", p.name))


def expectations(text: str) -> set[tuple[int, str]]:
    out = set()
    for number, line in enumerate(text.splitlines(), 1):
        match = EXPECT.search(line)
        if match:
            out |= {(number, c.strip()) for c in match.group("codes").split(",")}
    return out


def settings_for(*codes: str, **changes):
    from ptlint.config import Settings, validate

    settings = Settings(select=list(codes), **changes)
    validate(settings)
    return settings


def run_cli(*args: str, cwd: Path | None = None, stdin: str | bytes | None = None,
            env: dict | None = None) -> subprocess.CompletedProcess:
    """`ptlint ...` as a user runs it: a subprocess."""
    data = stdin.encode() if isinstance(stdin, str) else stdin
    proc = subprocess.run([sys.executable, "-m", "ptlint", *args], cwd=cwd, input=data,
                          capture_output=True, env=env, timeout=300)
    proc.stdout = proc.stdout.decode("utf-8", "replace")  # type: ignore[assignment]
    proc.stderr = proc.stderr.decode("utf-8", "replace")  # type: ignore[assignment]
    return proc


@pytest.fixture
def cli():
    return run_cli
