"""PTL028 scheduler-step-before-optimizer-step: after the fix the learning rates
follow the schedule.

The fixture's main() trains 4 epochs of 2 steps with SGD at lr 0.1 and
StepLR(step_size=2, gamma=0.1), and returns the learning rate of every
optimizer step (`lrs`). The schedule gives 0.1 for the first two epochs and
0.01 for the next two; the bad version, stepping the scheduler first, decays
an epoch early.
"""
CHANGES_RESULTS = True  # the learning rates, and so the weights, change
COMPARED = "the learning rate of every optimizer step"
SCHEDULE = [0.1] * 4 + [0.01] * 4


def compare(bad, fixed):
    b = [float(v) for v in bad.result["lrs"]]
    f = [float(v) for v in fixed.result["lrs"]]

    def follows(lrs):
        return len(lrs) == len(SCHEDULE) and all(
            abs(a - e) <= 1e-6 * e for a, e in zip(lrs, SCHEDULE))

    return follows(f) and not follows(b), (
        f"schedule {_show(SCHEDULE)}; fixed {_show(f)}; bad {_show(b)} (one epoch early)")


def _show(lrs):
    return " ".join(f"{v:g}" for v in lrs)
