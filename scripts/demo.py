#!/usr/bin/env python3
"""`make demo`: what ptlint does, shown on its own fixtures.

    python scripts/demo.py [VERIFY_ARG ...]

1. findings: `ptlint check` on every rule's bad example, where findings are
   expected, then one file's findings in full;
2. the autofixer: `--diff` of a copy of a bad fixture, `--fix`, and the fixed
   copy linted clean;
3. the runtime companion: `ptlint verify --report verify.html VERIFY_ARG...` (the
   HTML report, charts included, is left in verify.html);
4. a training script run as a user runs it: `ptlint verify
   runtime_checks/programs/train_digits.py -- --epochs 1`;

then one line that sums it up. Exits 0 only when every step did what it should:
findings where they are expected (exit 1), a clean file after the fix (exit 0),
every runtime check passed (exit 0). Runs the `ptlint` installed beside the
Python that runs this script.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PTLINT = Path(sys.executable).parent / "ptlint"
FIXED_EXAMPLE = "PTL110_log_of_one_plus"  # every finding has a safe fix
REPORT = "verify.html"  # step 3's HTML report, in the checkout (git ignores it)


class Demo:
    def __init__(self) -> None:
        self.failures: list[str] = []
        # ptlint's output is captured, not a terminal: give it the demo's width
        self.env = {**os.environ, "COLUMNS": str(shutil.get_terminal_size().columns)}

    def section(self, title: str) -> None:
        print(f"\n== {title}\n", flush=True)

    def run(self, args: list[str], expect: int, cwd: Path = ROOT) -> str:
        """Run `ptlint ARGS`, print what it prints, and note a failure when it
        exits otherwise than `expect`."""
        print(f"$ ptlint {shlex.join(args)}", flush=True)
        proc = subprocess.run([str(PTLINT), *args], cwd=cwd, env=self.env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        print(proc.stdout, end="" if proc.stdout.endswith("\n") or not proc.stdout else "\n")
        if proc.returncode != expect:
            self.failures.append(f"`ptlint {shlex.join(args)}` exited {proc.returncode}, "
                                 f"expected {expect}")
            print(f"[demo] unexpected exit status {proc.returncode} (expected {expect})")
        print(flush=True)
        return proc.stdout


def main(verify_args: list[str]) -> int:
    demo = Demo()
    demo.section("1. findings: ptlint on the rules' bad examples (findings are expected)")
    stats = demo.run(["check", "fixtures/", "--no-cache", "--statistics"], expect=1)
    counts = [(int(n), code) for n, code in re.findall(r"^\s*(\d+)\s+(PTL\d{3})\b", stats, re.M)]
    demo.run(["check", "fixtures/PTL001_loss_kept_with_graph/bad.py", "--no-cache"], expect=1)

    demo.section("2. the autofixer: a copy of a bad example, its diff, --fix, then linted again")
    with tempfile.TemporaryDirectory(prefix="ptlint-demo-") as tmp:
        shutil.copy(ROOT / "fixtures" / FIXED_EXAMPLE / "bad.py", Path(tmp) / "train.py")
        demo.run(["check", "--diff", "--no-cache", "train.py"], expect=1, cwd=Path(tmp))
        fixed = demo.run(["check", "--fix", "--no-cache", "train.py"], expect=0, cwd=Path(tmp))
        demo.run(["check", "--no-cache", "train.py"], expect=0, cwd=Path(tmp))
    fixes = re.search(r"Fixed (\d+) finding", fixed)

    demo.section("3. the runtime companion: each rule's bad and fixed programs run, "
                 "checked, timed and measured")
    verified = demo.run(["verify", "--report", REPORT, *verify_args], expect=0)
    tally = re.search(r"(\d+) passed, (\d+) failed", verified)

    demo.section("4. a training script as you would run it: the original against its fixed "
                 "copy, output, memory and time compared")
    demo.run(["verify", "runtime_checks/programs/train_digits.py", "--rounds", "3", "--",
              "--epochs", "1"], expect=0)

    if demo.failures:
        print(f"demo FAILED: {'; '.join(demo.failures)}")
        return 1
    runtime = f"{tally.group(1)} of {int(tally.group(1)) + int(tally.group(2))}" if tally else "all"
    print(f"demo passed: {sum(n for n, _ in counts)} findings ({len(counts)} rules), "
          f"{fixes.group(1) if fixes else 'no'} fixes, {runtime} runtime checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
