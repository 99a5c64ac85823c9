"""What every rule declares, checked for all of them (ruff's test.rs idea)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, settings_for
from ptlint.engine.lint import lint_text
from ptlint.model import Safety
from ptlint.rule import load, registry

RULES = list(registry().values())
REQUIRED = ("What it does", "Why is this bad?", "Example")


def test_there_are_rules():
    assert len(RULES) >= 1


def test_codes_and_names_unique():
    codes = [r.code for r in RULES]
    names = [r.name for r in RULES]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_declarations(rule):
    assert re.fullmatch(r"PTL[0-9]{3}", rule.code) and rule.code != "PTL000"
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name)
    assert not rule.name.startswith(("no-", "use-", "disallow-"))
    assert rule.message and not rule.message.endswith(".")
    module_file = Path(__import__(rule.__module__, fromlist=["_"]).__file__).name
    assert module_file == f"{rule.code.lower()}_{rule.name.replace('-', '_')}.py"
    assert (FIXTURES / f"{rule.code}_{rule.name.replace('-', '_')}").is_dir()
    if rule.fix_safety is not None:
        assert rule.fix_title, "a fixable rule needs a fix_title"
    # GitHub code scanning ranks security alerts by SARIF's security-severity
    if "security" in rule.tags:
        assert rule.security_severity is not None and 0.0 <= rule.security_severity <= 10.0
    else:
        assert rule.security_severity is None


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_docstring_sections(rule):
    doc = rule.documentation()
    for heading in REQUIRED:
        assert rule.doc_section(heading), f"missing `## {heading}`"
    assert "Use instead:" in rule.doc_section("Example")
    if rule.fix_safety not in (None, Safety.SAFE):
        assert rule.doc_section("Fix safety"), "a fix that is not safe must explain why"
    assert doc.count("```") % 2 == 0


def _blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_docs_example_is_flagged_and_use_instead_is_clean(rule):
    example = rule.doc_section("Example")
    before, _, after = example.partition("Use instead:")
    settings = settings_for(rule.code)
    bad = "\n".join(_blocks(before))
    good = "\n".join(_blocks(after))
    assert bad and good
    assert any(f.code == rule.code for f in lint_text(bad, "example.py", settings).findings)
    assert not lint_text(good, "example.py", settings).findings


@pytest.mark.parametrize("rule", [r for r in RULES if r.fix_safety is None] or [None],
                         ids=lambda r: r.code if r else "none")
def test_rule_without_fix_safety_never_fixes(rule):
    if rule is None:
        return  # every rule fixes
    folder = FIXTURES / f"{rule.code}_{rule.name.replace('-', '_')}"
    for name in ("bad.py", "good.py"):
        path = folder / name
        if path.exists():
            result = lint_text(path.read_text(encoding="utf-8"), name, settings_for(rule.code))
            assert all(f.fix is None for f in result.findings)
    assert not (folder / "fixed.py").exists()


def test_every_fixture_folder_has_a_rule():
    codes = {r.code for r in RULES}
    for folder in FIXTURES.iterdir():
        if folder.is_dir() and re.match(r"PTL\d{3}_", folder.name):
            assert folder.name.split("_")[0] in codes, folder.name


def test_docs_are_fresh():
    from ptlint import docs

    assert docs.main(["--check"]) == 0, "run `python -m ptlint.docs`"


def test_a_rule_loads_alone_as_the_catalog_says():
    """A file is linted importing only the rules it needs: each rule's catalog
    entry (module, texts, versions) must be the rule's own, in a process that
    has imported no other rule."""
    import subprocess
    import sys

    script = """
import sys
from ptlint._catalog import LOAD
from ptlint.rule import load
for code, (module, texts, versions) in LOAD.items():
    rule = load(code)
    assert (rule.code, tuple(rule.requires_text), rule.torch_versions) == (code, texts, versions)
    assert rule.__module__ == "ptlint.rules." + module
loaded = [m for m in sys.modules if m.startswith("ptlint.rules.ptl")]
assert len(loaded) == len(LOAD), loaded
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    only = subprocess.run(
        [sys.executable, "-c", "import sys\nfrom ptlint.rule import load\nload('PTL102')\n"
         "print(sorted(m for m in sys.modules if m.startswith('ptlint.rules.ptl')))"],
        capture_output=True, text=True)
    assert only.stdout.strip() == "['ptlint.rules.ptl102_data_parallel']", only.stderr
    assert {code: load(code) for code in registry()} == registry()
