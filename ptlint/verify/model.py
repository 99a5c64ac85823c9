"""What a runtime check sees: each version's results, memory and timing, and
the rule's `Spec` that judges them."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ptlint.verify.compare import DEFAULT_ATOL, DEFAULT_RTOL, compare_changes, compare_equal

if TYPE_CHECKING:
    from types import ModuleType

NOISY = 0.25  # interquartile range / median above which a timing is flagged


@dataclass
class MemoryPoint:
    """One measured call of `main()`. Bytes are on the run's device: resident
    memory on CPU, `torch.cuda` allocator bytes on CUDA."""

    params: dict[str, Any]
    peak: int | None  # highest use during the call, above what was in use before it
    retained: int | None  # still in use after it returned (its result alive), gc'd
    graph_nodes: int  # autograd nodes reachable from the tensors it returned


@dataclass
class Timing:
    median: float  # seconds per call of main() (of the script, for a script)
    iqr: float
    runs: int
    samples: list[float] = field(default_factory=list)  # one time per round, for the report


@dataclass
class Speed:
    """bad time / fixed time from interleaved rounds, with its confidence interval
    (see `ptlint.verify.timing`)."""

    ratio: float
    low: float
    high: float
    rounds: int

    @property
    def claim(self) -> str:
        if self.low > 1:
            return "faster"
        if self.high < 1:
            return "slower"
        return "no measurable difference"


@dataclass
class ScriptRun:
    """One run of a user's script as a program (`ptlint verify train.py -- ARGS`)."""

    status: int | None  # exit status; None: timed out
    stdout: str = ""
    stderr: str = ""
    peak_host: int | None = None  # the process's peak resident memory
    peak_cuda: int | None = None  # torch.cuda.max_memory_allocated(), when CUDA was used
    steps: list[tuple[int, int]] = field(default_factory=list)  # (step, bytes) at logged losses
    step_unit: str = "logged loss"  # what a step is: "step" when the script numbers them


@dataclass
class Version:
    """One program (bad, fixed or reference) as run by a worker."""

    label: str
    path: str
    device: str
    nproc: int = 1
    result: Any = None
    memory: list[MemoryPoint] = field(default_factory=list)
    timing: Timing | None = None
    error: str | None = None
    note: str | None = None  # e.g. why a sweep was skipped
    wall: float = 0.0
    run: ScriptRun | None = None  # a script run as a program: what its first run showed

    @property
    def peak(self) -> int | None:
        if self.run is not None:
            return self.run.peak_cuda if self.run.peak_cuda is not None else self.run.peak_host
        return self.memory[0].peak if self.memory else None

    def sweep(self, name: str) -> list[tuple[Any, MemoryPoint]]:
        """(value, point) for each swept value of keyword `name`, in order."""
        return [(p.params[name], p) for p in self.memory if name in p.params]


@dataclass
class Spec:
    """A rule's runtime check, read from `runtime_checks/ptlNNN.py`.

    The module may define (all optional):
      COMPARED: str          what the check compares (shown in the table)
      compare(bad, fixed[, reference]) -> (passed: bool, detail: str)
                             default: both versions' results are equal
      SWEEP: {"steps": (8, 16, 32)}
                             call main(steps=...) with each value to measure memory
      NPROC: int | tuple     how the fixed version is launched: 1 with plain `python`,
                             N > 1 with `torchrun --nproc_per_node=N`; a tuple launches
                             it once per entry (a row each), e.g. (1, 2): both ways
      READS_BAD_FILES: bool  the fixed version starts once bad has finished, in the same
                             working directory (one per check), so it can read what bad
                             wrote there (a checkpoint, a log)
      reference(device="cpu") -> dict
                             a hand-written third version, run like the others
      note(device) -> str | None
                             a remark printed under the table
      CHANGES: {"key": "why"} the results the fix changes on purpose (an unsafe fix that
                             corrects a bug): each must differ, every other result must
                             stay equal
      RTOL, ATOL: float      the tolerance of the default and CHANGES comparisons, scaled
                             to each result's magnitude (default 1e-4 and 1e-6; see
                             `ptlint.verify.compare`)
      CHANGES_RESULTS: bool  for `ptlint verify script.py`: the fix may change what
                             main() returns (it corrects a bug), so differing results
                             do not fail the check
    """

    code: str
    module: ModuleType | None = None
    path: Path | None = None

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self.module, name, default) if self.module is not None else default

    @property
    def compared(self) -> str:
        changes = self.get("CHANGES")
        if changes and not self.get("COMPARED"):
            return f"fix changes {', '.join(sorted(changes))}; the rest is equal"
        return self.get("COMPARED", "results of main() are equal")

    @property
    def sweep(self) -> dict[str, Sequence[Any]]:
        return dict(self.get("SWEEP", {}) or {})

    @property
    def launches(self) -> tuple[int, ...]:
        """The process counts the fixed version is launched with, one row each."""
        value = self.get("NPROC", 1)
        return tuple(int(n) for n in value) if isinstance(value, (tuple, list)) else (int(value),)

    @property
    def reads_bad_files(self) -> bool:
        return bool(self.get("READS_BAD_FILES", False))

    @property
    def has_reference(self) -> bool:
        return callable(self.get("reference"))

    @property
    def changes_results(self) -> bool:
        return bool(self.get("CHANGES_RESULTS", False))

    def note(self, device: str) -> str | None:
        note = self.get("note")
        return note(device) if callable(note) else note

    def compare(self, bad: Version, fixed: Version,
                reference: Version | None) -> tuple[bool | None, str]:
        """(passed, detail); passed None: inconclusive, nothing comparable."""
        compare = self.get("compare")
        tolerance = self.get("RTOL", DEFAULT_RTOL), self.get("ATOL", DEFAULT_ATOL)
        if compare is None and self.get("CHANGES"):
            return compare_changes(bad, fixed, self.get("CHANGES"), *tolerance)
        if compare is None:
            return compare_equal(bad, fixed, *tolerance)
        if self.has_reference:
            return compare(bad, fixed, reference)
        return compare(bad, fixed)


@dataclass
class Check:
    """One row of the table: a bad/fixed pair and the spec that judges it."""

    code: str
    name: str
    source: str  # where the pair lives, for the reader
    bad: Path
    fixed: Path
    spec: Spec
    sys_path: tuple[str, ...] = ()
    codes_fixed: tuple[str, ...] = ()  # user scripts: the rules whose fixes were applied
    module_name: str = "ptlint_verify_target"


VERDICTS = ("passed", "failed", "inconclusive")


@dataclass
class Row:
    """One checked pair. verdict: passed (something was compared and held), failed,
    or inconclusive (nothing comparable: main() returned nothing, the script
    printed nothing)."""

    check: Check
    device: str
    verdict: str
    detail: str
    bad: Version
    fixed: Version
    reference: Version | None = None
    note: str | None = None
    speed: Speed | None = None  # from interleaved rounds, when both were timed so
    facts: list[tuple[str, str]] = field(default_factory=list)  # (label, text) for the report
    comparable_time: bool = True  # False: the two times mean nothing side by side (PTL102 on CPU)

    @property
    def passed(self) -> bool:
        return self.verdict == "passed"

    @property
    def noisy(self) -> bool:
        """A spread above a quarter of the median: the ratio is not to be trusted."""
        return any(v.timing is not None and v.timing.iqr > NOISY * v.timing.median
                   for v in (self.bad, self.fixed))

    @property
    def ratio(self) -> float | None:
        if not self.comparable_time:
            return None
        if self.speed is not None:
            return self.speed.ratio
        if self.bad.timing and self.fixed.timing and self.fixed.timing.median > 0:
            return self.bad.timing.median / self.fixed.timing.median
        return None
