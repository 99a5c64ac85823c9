"""Loaded at interpreter start-up when tests/robust_plugin is on PYTHONPATH
(tests/test_robustness.py does that for its subprocesses): makes the
misbehaving test rules in rules/ visible to ptlint's registry, and can make a
file vanish between discovery and reading. Never shipped."""
import os

if os.environ.get("PTLINT_TEST_RULES"):
    import ptlint.rules

    ptlint.rules.__path__.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "rules"))
    # settings select rules from the generated catalog: it must know them too
    import ptlint._catalog
    from ptlint.rule import registry

    ptlint._catalog.RULES.update((c, (r.name, r.default_enabled)) for c, r in registry().items())

if os.environ.get("PTLINT_TEST_VANISH"):
    import ptlint.io.files

    _discover = ptlint.io.files.discover

    def discover(paths, settings):
        found = _discover(paths, settings)
        for name in os.environ["PTLINT_TEST_VANISH"].split(os.pathsep):
            os.unlink(name)  # found, then gone before it is read
        return found

    ptlint.io.files.discover = discover
