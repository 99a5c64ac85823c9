"""`ptlint verify`: the runtime companion. Run a rule's bad and fixed programs,
check what the fix changes, and time both.

Each version is a Python file defining `main(device="cpu")` that returns a dict
of results (tensors, numbers, lists of them). `ptlint verify` runs each version
in a process of its own, with a fixed seed and a time limit: on CPU a process
forked from a server that imported torch once (multiprocessing's forkserver);
on CUDA a fresh `python -m ptlint.verify.worker JOB`; under `torchrun` for
checks that need several processes. The worker calls `main()` once for the
results, again to measure memory (and for each value of a swept keyword), and
times it with `torch.utils.benchmark.Timer`. The parent then hands both results
to the rule's check.

Where the pairs and checks live: `fixtures/` and `runtime_checks/ptlNNN.py` (one
module per rule, see `Spec`) in a source checkout; an installed ptlint carries a
copy of the runnable pairs and the checks in `ptlint/verify/data/` (setup.py puts
them there). A rule with runnable fixtures but no such module gets the default
check: both versions return equal results, up to rounding (see `compare`).

Torch is imported only inside functions of this module and in the worker
subprocesses, never by the linter core.

The package:

- `model`: what a check sees (versions, their results, memory and timing) and
  a rule's `Spec`;
- `compare`: comparing results at a tolerance scaled to each result's size
  (`difference`, `allclose`), and the helpers checks use (`max_diff`,
  `growth_per_step`, ...);
- `checks`: finding the bad/fixed pairs and the rules' checks, and fixing a
  user's script;
- `run`: running each version in its own process (fork server, fresh
  interpreter or torchrun) and collecting rows;
- `worker`: what runs inside that process (it imports torch);
- `report`: the table and the JSON; `command`: `ptlint verify` itself.

May import: `ptlint.model`, `ptlint.config`, `ptlint.engine`, `ptlint.io`,
`ptlint.rule`. Nothing outside `worker` imports torch at module level.
"""
