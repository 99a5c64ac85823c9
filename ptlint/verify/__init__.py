"""`ptlint verify`: the runtime companion. Run a rule's bad and fixed programs,
check what the fix changes, and time both.

Two modes. A rule's pair, or a user's file defining `main(device)`: each
version is a Python file defining `main(device="cpu")` that returns a dict
of results (tensors, numbers, lists of them). `ptlint verify` runs each version
in a process of its own, with a fixed seed and a time limit: on CPU a process
forked from a server that imported torch once (multiprocessing's forkserver);
on CUDA a fresh `python -m ptlint.verify.worker JOB`; under `torchrun` for
checks that need several processes. The worker calls `main()` once for the
results, again to measure memory (and for each value of a swept keyword), and
measures memory; one more process times bad and fixed in interleaved rounds with
`torch.utils.benchmark.Timer`. The parent then hands both results to the rule's
check, whose verdict is passed, failed or inconclusive.

A user's script run as a program (`ptlint verify train.py -- ARGS`): the
original and a fixed copy run as they are, in copies of the script's folder,
through `python -m ptlint.verify.launch JOB` (or forked from the server), in
interleaved rounds; their output, memory at each logged loss and time are
compared (`script`, `outputs`).

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
- `timing`: the ratio of interleaved rounds and its confidence interval;
- `script`, `outputs`, `launch`: a script run as a program: preparing and
  running both versions, comparing what they print and the memory per logged
  step, and the launcher inside each process (it imports torch);
- `report`: the table and the JSON; `html`: the HTML page (matplotlib);
  `command`: `ptlint verify` itself.

May import: `ptlint.model`, `ptlint.config`, `ptlint.config_files`, `ptlint.engine`, `ptlint.io`,
`ptlint.rule`. Nothing imports torch at module level; matplotlib only inside
`html`'s functions.
"""
