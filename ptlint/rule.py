"""The rule base class and the registry built from `ptlint.rules`."""
from __future__ import annotations

import functools
import importlib
import inspect
import io
import pkgutil
import re
import time
import tokenize
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, ClassVar, Iterable, Iterator, Sequence

import libcst as cst

from ptlint.model import Safety
from ptlint.analysis.walk import Visitor

if TYPE_CHECKING:
    from ptlint.analysis.names import NameResolver
    from ptlint.analysis.semantic import SemanticModel

@dataclass
class Report:
    """What a rule said about one node; the engine turns it into a `Finding`."""

    rule: "Rule"
    node: cst.CSTNode
    message: str
    edits: tuple[tuple[cst.CSTNode, cst.CSTNode | None], ...] = ()
    safety: Safety | None = None
    imports: tuple[str, ...] = ()
    fix_title: str | None = None


@dataclass
class Context:
    """What a rule may know about the file besides its tree."""

    path: str
    source: str
    names: "NameResolver"
    torch_version: object | None = None  # packaging.version.Version
    timings: dict[str, float] | None = None  # per-rule seconds, when --timings asks
    reports: list[Report] = field(default_factory=list)
    shared: dict = field(default_factory=dict)  # what rules work out once for all of them
    semantic: "SemanticModel | None" = None  # when an enabled rule asks for it
    cells: tuple[int, ...] = ()  # a notebook's: the line where each cell starts in `source`

    def mentions(self, pattern: re.Pattern[str]) -> bool:
        """Whether the file's code, not its comments, matches `pattern`
        (`# model.cuda()  # uncomment for the GPU` runs on the CPU). Worked out
        once per file and pattern."""
        key = ("mentions", pattern)
        found = self.shared.get(key)
        if found is None:
            found = self.shared[key] = code_matches(pattern, self.source)
        return found

    @property
    def names_torch(self) -> bool:
        """Whether the file's code names torch."""
        return self.mentions(_TORCH)

    @property
    def foreign(self) -> bool:
        """A file of another framework: it imports Jittor, Paddle, TensorFlow, …
        and never names torch (its `model.eval()`, `.weight.data` are not torch's)."""
        return self.mentions(_FOREIGN) and not self.names_torch  # (the rare one first)


_TORCH = re.compile(r"\btorch\b")
_FOREIGN = re.compile(r"(?m)^[ \t]*(?:import|from)[ \t]+(?:paddle|mindspore|jittor|oneflow|"
                      r"megengine|mxnet|tensorflow)\b")


def without_comments(code: str) -> str:
    """`code` with its comments left out (as it is, if it does not tokenize)."""
    from ptlint.io.text import tokens

    lines = io.StringIO(code).readlines()  # the lines the tokenizer numbers
    for token in tokens(code):
        if token.type == tokenize.COMMENT:  # a comment runs to the end of its line
            row, column = token.start
            lines[row - 1] = lines[row - 1][:column] + "\n"
    return "".join(lines)


def code_matches(pattern: re.Pattern[str], code: str) -> bool:
    """Whether `code`, its comments left out, matches `pattern`."""
    return bool(pattern.search(code)) and bool(pattern.search(without_comments(code)))


def _kebab(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", name).lower()


class Rule(Visitor):
    """Base class of every rule: a batchable LibCST visitor.

    Subclasses set the class attributes below and report with `self.report`.
    The class docstring is the rule's documentation.
    """

    code: ClassVar[str]
    message: ClassVar[str]
    fix_title: ClassVar[str | None] = None
    fix_safety: ClassVar[Safety | None] = None
    default_enabled: ClassVar[bool] = True
    tags: ClassVar[tuple[str, ...]] = ()
    # Rules tagged "security": the CVSS-like score (0.0-10.0) GitHub code scanning
    # ranks their alerts by (SARIF `security-severity`).
    security_severity: ClassVar[float | None] = None
    # The file is only parsed for this rule when it contains one of these strings.
    requires_text: ClassVar[tuple[str, ...]] = ()
    # PEP 440 specifier the target torch version must satisfy for the rule to run.
    torch_versions: ClassVar[str | None] = None
    # The rule queries the file's semantic model (`self.model`).
    semantic: ClassVar[bool] = False
    name: ClassVar[str]
    failed: "RuleError | None" = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.name = _kebab(cls.__name__)

    def __init__(self, context: Context) -> None:
        super().__init__()
        self.context = context

    # -- helpers for subclasses ---------------------------------------------
    def qualified_name(self, node: cst.CSTNode) -> str | None:
        """What `node` (a name, attribute chain, or the callee of a call) refers to."""
        return self.context.names.qualified_name(node)

    @property
    def model(self) -> "SemanticModel":
        """The file's semantic model (`ptlint.analysis.semantic`), for rules
        that declare `semantic = True`."""
        assert self.context.semantic is not None, f"{self.code} does not declare `semantic`"
        return self.context.semantic

    def is_name(self, node: cst.CSTNode, *qualified: str) -> bool:
        """Whether `node` (or the callee of a call) refers to one of `qualified`."""
        func = node.func if type(node) is cst.Call else node
        # An attribute's own name is spelled out (`x.load` can only be `<...>.load`):
        # most calls are told apart without resolving their chain.
        if type(func) is cst.Attribute and not any(
                q.rpartition(".")[2] == func.attr.value for q in qualified):
            return False
        return self.context.names.qualified_name(func) in qualified

    def report(
        self,
        node: cst.CSTNode,
        *,
        message: str | None = None,
        replacement: cst.CSTNode | None = None,
        edits: Iterable[tuple[cst.CSTNode, cst.CSTNode | None]] = (),
        safety: Safety | None = None,
        imports: Sequence[str] = (),
        fix_title: str | None = None,
    ) -> None:
        """Report `node`; `replacement` (or `edits`, pairs of old and new node,
        new None to delete) make it fixable."""
        pairs = tuple(edits)
        if replacement is not None:
            pairs = ((node, replacement), *pairs)
        if pairs and self.fix_safety is None:
            raise TypeError(f"{self.code} declares no fix_safety but reported a fix")
        self.context.reports.append(
            Report(
                rule=self,
                node=node,
                message=message or self.message,
                edits=pairs,
                safety=safety or self.fix_safety,
                imports=tuple(imports),
                fix_title=fix_title or self.fix_title,
            )
        )

    # -- documentation ------------------------------------------------------
    @classmethod
    def documentation(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def doc_section(cls, heading: str) -> str | None:
        """The text under `## heading` of the docstring, or None."""
        match = re.search(
            rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", cls.documentation(), re.S | re.M
        )
        return match.group(1).strip() if match else None

    @classmethod
    def description(cls) -> str:
        """One line for tables: the message, or where the message is a template
        filled in per finding, the first sentence of `What it does`."""
        if "{" not in cls.message:
            return cls.message
        return cls.summary().split(". ")[0].rstrip(".")

    @classmethod
    def summary(cls) -> str:
        text = cls.doc_section("What it does") or cls.message
        return " ".join(text.split("\n\n", 1)[0].split())

    # -- isolation: a rule that raises must not take the others down ---------
    # The walk hands an exception to `rule_failed`; with --timings, each method
    # is wrapped to be timed, and the wrapper records the failure itself.
    def get_visitors(self) -> dict[str, Callable[[cst.CSTNode], None]]:
        methods = super().get_visitors()
        if self.context.timings is None:
            return methods
        return {name: _guarded(self, fn) for name, fn in methods.items()}


class RuleError(Exception):
    """A rule raised while visiting a file."""

    def __init__(self, code: str, original: BaseException) -> None:
        super().__init__(f"{code}: {type(original).__name__}: {original}")
        self.code = code
        self.original = original


def rule_failed(visitor: object, exc: Exception) -> bool:
    """The walk's `on_error`: a rule that raised is marked failed and left out
    of the rest of the file (anything else that raises stops the walk)."""
    if not isinstance(visitor, Rule):
        return False
    visitor.failed = RuleError(visitor.code, exc)
    return True


def _guarded(rule: Rule, fn: Callable[[cst.CSTNode], None]) -> Callable[[cst.CSTNode], None]:
    timings = rule.context.timings
    clock = time.perf_counter
    key = f"rule {rule.code}"

    def call(node: cst.CSTNode) -> None:
        if rule.failed is not None:
            return
        started = clock() if timings is not None else 0.0
        try:
            fn(node)
        except RecursionError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported as an internal error
            rule.failed = RuleError(rule.code, exc)
        if timings is not None:
            timings[key] = timings.get(key, 0.0) + clock() - started

    return call



def _rules_in(module: types.ModuleType) -> Iterator[type[Rule]]:
    for obj in vars(module).values():
        if (
            isinstance(obj, type)
            and not isinstance(obj, types.GenericAlias)  # `list[str]` passes on Python 3.10
            and issubclass(obj, Rule)
            and obj.__module__ == module.__name__
            and getattr(obj, "code", None)
        ):
            yield obj


@functools.cache
def registry() -> dict[str, type[Rule]]:
    """Every rule in `ptlint.rules`, by code, in code order."""
    import ptlint.rules as package

    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(package.__path__):
        for obj in _rules_in(importlib.import_module(f"{package.__name__}.{info.name}")):
            if obj.code in found:
                raise RuntimeError(f"duplicate rule code {obj.code}")
            found[obj.code] = obj
    return dict(sorted(found.items()))


@functools.cache
def load(code: str) -> type[Rule]:
    """One rule, importing its module only (found in the generated catalog)."""
    from ptlint._catalog import LOAD

    module = importlib.import_module(f"ptlint.rules.{LOAD[code][0]}")
    return next(rule for rule in _rules_in(module) if rule.code == code)
