"""The wheel's build step that pyproject.toml cannot say: ship what `ptlint verify`
runs, so that an installed ptlint verifies its rules without a source checkout.

The runnable bad/fixed pairs (from fixtures/ and runtime_checks/programs/) and
the rules' runtime checks (runtime_checks/ptlNNN.py), as chosen by
`ptlint.verify.checks.shipped_files`, are copied into the wheel's
`ptlint/verify/data/` in the checkout's layout; `find_root` finds them there.
Nothing else of fixtures/ or runtime_checks/ is shipped. An editable install
reads the checkout itself.
"""
import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        sys.path.insert(0, str(HERE))
        from ptlint.verify.checks import shipped_files

        target = Path(self.build_lib) / "ptlint" / "verify" / "data"
        shutil.rmtree(target, ignore_errors=True)  # nothing left from an earlier build
        for relative in shipped_files(HERE):
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(HERE / relative, target / relative)


setup(cmdclass={"build_py": BuildPy})
