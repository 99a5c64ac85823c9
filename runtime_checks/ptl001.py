"""PTL001 loss-kept-with-graph: a kept loss keeps its graph, so memory grows per step.

main(device, steps=N) runs N steps and returns {"losses": the N losses as floats}.
The worker calls it at each N of SWEEP and measures the peak memory of the call:
resident memory on CPU, allocator bytes on CUDA. The bad version keeps every
step's graph until the loop ends, so its peak grows linearly with N; the fixed
one keeps one step's at a time and stays flat; the losses must be equal.

When the kept losses were already backpropagated, backward() has freed their
saved activations and only the autograd graph itself is kept; the check then
falls back to counting the graph's nodes (and says so).
"""
from ptlint.verify.compare import difference, fmt_bytes, growth_per_step

COMPARED = "peak memory over N steps (N = 8, 16, 32); recorded losses"
SWEEP = {"steps": (8, 16, 32)}
MIN_GROWTH = 32 * 1024  # bytes per step the bad version must keep, at least
FLAT = 0.1  # the fixed version may keep at most this fraction of the bad one's growth


def _linear(points) -> bool:
    """Equal growth per step between successive N (within a factor of 2)."""
    rates = [(b.peak - a.peak) / (nb - na)
             for (na, a), (nb, b) in zip(points, points[1:])]
    return all(r > 0 for r in rates) and max(rates) <= 2 * min(rates)


def compare(bad, fixed):
    d = difference(bad.result["losses"], fixed.result["losses"])
    losses = d.ok
    loss_text = f"losses equal ({d.within()})" if losses else f"losses differ: {d.describe()}"
    bad_points, fixed_points = bad.sweep("steps"), fixed.sweep("steps")
    if len(bad_points) < 2 or len(fixed_points) < 2:  # main() takes no `steps`
        b, f = bad.memory[0], fixed.memory[0]
        kept = b.retained is not None and f.retained is not None and (
            b.retained - f.retained >= MIN_GROWTH)
        return losses and kept and f.graph_nodes == 0, (
            f"kept after main(): bad {fmt_bytes(b.retained)} ({b.graph_nodes} graph nodes), "
            f"fixed {fmt_bytes(f.retained)} ({f.graph_nodes}); {loss_text}")
    b_rate = growth_per_step(bad_points, "peak")
    f_rate = growth_per_step(fixed_points, "peak")
    if b_rate is None or f_rate is None:
        return False, "memory could not be measured on this platform"
    steps = " -> ".join(str(n) for n, _ in bad_points)
    kept = " -> ".join(fmt_bytes(p.peak) for _, p in bad_points)
    memory_ok = (b_rate >= MIN_GROWTH and _linear(bad_points)
                 and abs(f_rate) <= FLAT * b_rate)
    text = (f"bad's peak grows {fmt_bytes(b_rate)}/step, linearly ({kept} at {steps} steps); "
            f"fixed {fmt_bytes(f_rate)}/step (flat); {loss_text}")
    if memory_ok:
        return losses, text
    b_nodes = growth_per_step(bad_points, "graph_nodes") or 0
    f_nodes = growth_per_step(fixed_points, "graph_nodes") or 0
    if b_nodes > 0 and f_nodes == 0 and abs(f_rate) <= max(FLAT * abs(b_rate), MIN_GROWTH):
        return losses, (f"memory kept is small in both (bad {fmt_bytes(b_rate)}/step, fixed "
                        f"{fmt_bytes(f_rate)}/step: backward() freed the saved activations); "
                        f"bad keeps {b_nodes:.0f} autograd nodes/step, fixed none; {loss_text}")
    return False, text
