"""Which checks to run: the rules' runnable bad/fixed pairs and their specs,
or a user's script with ptlint's fixes applied to a copy."""
from __future__ import annotations

import re
import sys
from pathlib import Path

from ptlint.verify.compare import by_how_much, changed_leaves, compare_equal
from ptlint.verify.model import Check, Spec, Version

CODE = re.compile(r"^PTL\d{3}$", re.I)
ROOT = Path(__file__).resolve().parent.parent.parent  # the source checkout, if this is one
DATA = Path(__file__).resolve().parent / "data"  # an installed ptlint: what its wheel ships


def defines_main(path: Path) -> bool:
    import ast

    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return False
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "main"
               for n in tree.body)


def find_root(start: Path | None = None) -> Path | None:
    """Where the pairs and checks are: the nearest folder holding both `fixtures/`
    and `runtime_checks/`, from the current folder up; else the copy an installed
    ptlint ships (`ptlint/verify/data/`, see `shipped_files`); else the source
    checkout this package was imported from."""
    here = (start or Path.cwd()).resolve()
    for folder in [here, *here.parents, DATA, ROOT]:
        if (folder / "fixtures").is_dir() and (folder / "runtime_checks").is_dir():
            return folder
    return None


def load_spec(root: Path | None, code: str) -> Spec:
    import importlib.util

    if root is None:
        return Spec(code)
    path = root / "runtime_checks" / f"{code.lower()}.py"
    if not path.is_file():
        return Spec(code)
    module_name = f"ptlint_runtime_check_{code.lower()}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return Spec(code, module, path)


def rule_pairs(root: Path) -> dict[str, tuple[str, Path]]:
    """Code -> (name, folder) of every runnable bad/fixed pair: a fixture folder
    whose bad.py and fixed.py both define main(), unless the rule has a runtime
    program in runtime_checks/programs/<CODE>_<name>/ (a pair sized to show the
    consequence, e.g. memory that grows with the number of steps), which wins."""
    pairs: dict[str, tuple[str, Path]] = {}
    for parent in (root / "fixtures", root / "runtime_checks" / "programs"):  # programs win
        if not parent.is_dir():
            continue
        for folder in sorted(parent.iterdir()):
            match = re.match(r"(PTL\d{3})_(\w+)$", folder.name)
            if match and folder.is_dir() and _runnable(folder):
                pairs[match.group(1)] = (match.group(2).replace("_", "-"), folder)
    return dict(sorted(pairs.items()))


def shipped_files(root: Path) -> list[Path]:
    """What a wheel ships for `ptlint verify`, relative to the checkout `root`: each
    runnable pair's bad.py and fixed.py, and the rules' runtime checks. setup.py
    copies them into the wheel's `ptlint/verify/data/`, keeping this layout."""
    files = []
    for code, (_, folder) in rule_pairs(root).items():
        files += [folder / "bad.py", folder / "fixed.py"]
        check = root / "runtime_checks" / f"{code.lower()}.py"
        if check.is_file():
            files.append(check)
    return [f.relative_to(root) for f in files]


def _runnable(folder: Path) -> bool:
    return all((folder / n).is_file() and defines_main(folder / n) for n in ("bad.py", "fixed.py"))


class UsageError(Exception):
    """Something the user must change; exit 2."""


def _display(path: Path, root: Path | None) -> str:
    try:
        return str(path.resolve().relative_to((root or Path.cwd()).resolve()))
    except ValueError:
        return str(path)


def checks_for_rules(root: Path | None, codes: list[str]) -> list[Check]:
    if root is None:
        raise UsageError("no bad/fixed pairs found: this ptlint was installed without "
                         "them; run `ptlint verify` in a ptlint source checkout, pass --root, "
                         "or pass a script that defines main(device)")
    pairs = rule_pairs(root)
    wanted = codes or list(pairs)
    checks = []
    for code in wanted:
        if code not in pairs:
            raise UsageError(f"{code} has no runnable bad/fixed pair (fixtures/{code}_*/bad.py "
                             "and fixed.py defining main(device))")
        name, folder = pairs[code]
        checks.append(Check(code, name, _display(folder, root),
                            folder / "bad.py", folder / "fixed.py", load_spec(root, code)))
    return checks


def fix_script(path: Path) -> tuple[list[str], str] | None:
    """The codes of the findings ptlint fixes in `path` (safe and unsafe fixes, as
    `--fix --unsafe-fixes`), and the fixed text; None when there is nothing to fix.
    The script itself is only read."""
    from ptlint.config_files import find_config, load_config
    from ptlint.engine.fix import fix_text
    from ptlint.engine.lint import lint_text
    from ptlint.io.text import decode

    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    text = decode(path.read_bytes()).text
    settings = load_config(find_config(path))
    before = lint_text(text, str(path), settings)
    codes = sorted({f.code for f in before.findings if f.fix is not None
                    and settings.fix_allowed(f.code, f.fix.safety, unsafe=True)})
    fixed = fix_text(text, str(path), settings, unsafe=True)
    return None if fixed.text == text else (codes, fixed.text)


def takes_device(path: Path) -> bool:
    """`path` defines a top-level main() with a `device` parameter: verify calls
    it (the function mode); any other script is run as a program."""
    import ast

    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return False
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "main"
               and "device" in [a.arg for a in n.args.args + n.args.kwonlyargs]
               for n in tree.body)


def check_for_script(path: Path, root: Path | None, workdir: Path) -> Check | None:
    """Fix a copy of the user's script (safe and unsafe fixes) in `workdir`, to
    call its main(device). None when ptlint has nothing to fix in it."""
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    if not defines_main(path):
        raise UsageError(f"{path}: defines no top-level main(device) to run")
    fixed = fix_script(path)
    if fixed is None:
        return None
    codes, text = fixed
    copy = workdir / "fixed" / path.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(text, encoding="utf-8")
    specs = [load_spec(root, c) for c in codes]
    spec = ScriptSpec(",".join(codes), specs)
    stem = path.stem if path.stem.isidentifier() else "ptlint_verify_target"
    return Check(",".join(codes), path.name, _display(path, None), path, copy, spec,
                 sys_path=(str(path.resolve().parent),), codes_fixed=tuple(codes),
                 module_name=stem)


class ScriptSpec(Spec):
    """The check for a user's script: results equal, unless one of the applied
    fixes is documented to change them (it corrects a bug): then differing
    results are reported, not failed."""

    def __init__(self, code: str, specs: list[Spec]) -> None:
        super().__init__(code)
        self.specs = specs

    def changing(self) -> dict[str, str]:
        """The applied fixes documented to change results: code -> why."""
        from ptlint.model import Safety
        from ptlint.rule import registry

        out = {}
        for spec in self.specs:
            if spec.module is not None:
                if spec.changes_results or spec.get("CHANGES"):
                    out[spec.code] = _why(spec)
            else:  # the rule has no runtime check: trust the fix's safety
                rule = registry().get(spec.code)
                if rule is not None and rule.fix_safety is Safety.UNSAFE:
                    out[spec.code] = _fix_safety(rule.__doc__ or "") or "its fix is unsafe"
        return out

    @property
    def compared(self) -> str:
        return "results of main() before and after `ptlint --fix --unsafe-fixes`"

    def note(self, device: str) -> str | None:
        return None

    def compare(self, bad: Version, fixed: Version,
                reference: Version | None) -> tuple[bool | None, str]:
        passed, detail = compare_equal(bad, fixed)
        if passed is not False:
            return passed, detail
        changing = self.changing()
        if not changing:
            return False, detail
        changed = "; ".join(by_how_much(d) for d in changed_leaves(bad.result, fixed.result))
        why = "; ".join(f"{code}: {text}" for code, text in changing.items())
        return True, f"results changed on purpose: {changed}. Why, as documented: {why}"


def _why(spec: Spec) -> str:
    """What a rule's runtime check says its fix changes: its CHANGES, else the
    first sentence of its docstring after the rule's name."""
    changes = spec.get("CHANGES")
    if changes:
        return "; ".join(changes.values())
    doc = (spec.module.__doc__ or "").strip() if spec.module is not None else ""
    first = doc.split("\n\n")[0].replace("\n", " ")
    return first.split(": ", 1)[-1] if first else "its fix corrects a bug"


def _fix_safety(doc: str) -> str:
    """The text of a rule docstring's `## Fix safety` section, on one line."""
    import re

    match = re.search(r"## Fix safety\s*\n(.*?)(?:\n\s*## |\Z)", doc, re.S)
    return " ".join(match.group(1).split()) if match else ""
