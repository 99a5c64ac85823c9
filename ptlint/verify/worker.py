"""The worker: runs one version in its own process (one per rank under
torchrun), seeded, and writes its results, memory and timing for the parent.

`python -m ptlint.verify.worker JOB.json`; CPU versions are forked from a
server that preloaded this module and torch.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

from ptlint.verify.compare import leaves

MMAP_THRESHOLD = 65536  # glibc, when measuring memory: blocks from 64 KiB on via mmap


def _seed(seed: int) -> None:
    import random

    import torch

    random.seed(seed)
    torch.manual_seed(seed)  # every device's generator
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(seed)


def _rss() -> int | None:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _max_rss() -> int:
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _reset_peak_rss() -> bool:
    """Linux: make the peak RSS start again from the current RSS."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _fix_mmap_threshold() -> None:
    """glibc: serve blocks from 64 KiB up with mmap and never raise that bound, so
    freed tensors go back to the OS and resident memory follows what is held."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(-3, MMAP_THRESHOLD)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def _graph_nodes(result: Any) -> int:
    import torch

    seen: dict[int, Any] = {}
    stack = [leaf.grad_fn for _, leaf in leaves(result)
             if isinstance(leaf, torch.Tensor) and leaf.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node  # hold it, so ids stay unique
        stack.extend(n for n, _ in getattr(node, "next_functions", ()))
    return len(seen)


def _to_cpu(result: Any) -> Any:
    import torch

    if isinstance(result, torch.Tensor):
        return result.detach().cpu()
    if isinstance(result, dict):
        return {str(k): _to_cpu(v) for k, v in result.items()}
    if isinstance(result, (list, tuple)):
        return [_to_cpu(v) for v in result]
    if isinstance(result, torch.Size):
        return list(result)
    if result is None or isinstance(result, (bool, int, float, str)):
        return result
    if hasattr(result, "item") and callable(result.item):  # numpy scalars
        return result.item()
    return repr(result)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _measure(fn: Callable, params: dict, device: str, seed: int) -> dict:
    import gc

    import torch

    cuda = device.startswith("cuda")
    gc.collect()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        reset = True
    else:
        base = _rss()
        reset = _reset_peak_rss()
        before_peak = _max_rss()
    _seed(seed)
    result = fn(device, **params)
    _sync(device)
    gc.collect()
    if cuda:
        peak = torch.cuda.max_memory_allocated() - base
        retained = torch.cuda.memory_allocated() - base
    else:
        now = _rss()
        retained = now - base if now is not None and base is not None else None
        after_peak = _max_rss()
        if base is None:
            peak = None
        elif reset or after_peak > before_peak:
            peak = max(0, after_peak - base)
        else:
            peak = None  # the old high-water mark hides this call's peak
    nodes = _graph_nodes(result)
    del result
    return {"params": params, "peak": peak, "retained": retained, "graph_nodes": nodes}


def _time(fn: Callable, device: str, min_time: float, repeats: int, threads: int) -> dict:
    import statistics

    import torch
    from torch.utils.benchmark import Timer

    timer = Timer(stmt="fn(device)", globals={"fn": fn, "device": device},
                  num_threads=threads)  # and it synchronises CUDA itself
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # every rank must call main() equally often: no adaptive block sizes
        times = [timer.timeit(number=1).median for _ in range(repeats)]
        q = statistics.quantiles(times, n=4) if len(times) > 1 else [times[0]] * 3
        return {"median": statistics.median(times), "iqr": q[2] - q[0], "runs": len(times)}
    m = timer.blocked_autorange(min_run_time=min_time)
    return {"median": m.median, "iqr": m.iqr, "runs": len(m.times) * m.number_per_run}


def _load_function(path: str, function: str, module_name: str) -> Callable:
    import importlib.util

    if module_name in sys.modules:  # a script named like a module already imported
        module_name = "ptlint_verify_target"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    fn = getattr(module, function, None)
    if not callable(fn):
        raise AttributeError(f"{path} defines no {function}()")
    return fn


def _sweep_points(fn: Callable, sweep: dict) -> tuple[list[dict], str | None]:
    import inspect

    if not sweep:
        return [], None
    params = inspect.signature(fn).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    missing = [k for k in sweep if k not in params and not takes_any]
    if missing:
        return [], f"main() takes no `{missing[0]}`, so memory was measured once"
    points: list[dict] = []
    for name, values in sweep.items():
        points += [{name: v} for v in values]
    return points, None


def _time_pair(fns: list[Callable], device: str, min_time: float, rounds: int,
               threads: int) -> list[list[float]]:
    """Seconds per call of each function, round by round, the functions taking
    turns and the order swapped every round (bad, fixed, fixed, bad, ...: neither
    always goes first): [[bad, fixed], ...]."""
    from torch.utils.benchmark import Timer

    timers = [Timer(stmt="fn(device)", globals={"fn": fn, "device": device},
                    num_threads=threads) for fn in fns]  # each synchronises CUDA itself
    for timer in timers:
        timer.timeit(number=1)  # warm-up
    block = max(min_time / rounds, 0.01)
    rounds_times = []
    for i in range(rounds):
        times = [0.0] * len(timers)
        for k in (range(len(timers)) if i % 2 == 0 else reversed(range(len(timers)))):
            times[k] = timers[k].blocked_autorange(min_run_time=block).median
        rounds_times.append(times)
    return rounds_times


def _pair(job: dict) -> dict:
    fns = [_load_function(v["file"], "main", v["module"]) for v in job["pair"]]
    _seed(job["seed"])
    return {"error": None, "rounds": _time_pair(fns, job["device"], job["min_time"],
                                                job["rounds"], job["threads"])}


def worker(job_path: str) -> int:
    import traceback
    import warnings

    sys.dont_write_bytecode = True
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    if job["fix_mmap"]:
        _fix_mmap_threshold()
    rank = int(os.environ.get("RANK", "0"))
    metrics: dict[str, Any] = {}
    import torch

    torch.set_num_threads(job["threads"])
    try:
        for entry in reversed(job["sys_path"]):
            sys.path.insert(0, entry)
        metrics = _pair(job) if job.get("pair") else _version(job, rank)
    except BaseException:  # noqa: BLE001 - report whatever main() raised
        metrics = {"error": traceback.format_exc()}
    finally:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            try:
                torch.distributed.destroy_process_group()
            except Exception:  # noqa: BLE001
                pass
    if rank == 0 or metrics.get("error"):
        path = Path(job["metrics"])
        if rank != 0:
            path = path.with_name(f"{path.stem}.rank{rank}.json")
        path.write_text(json.dumps(metrics), encoding="utf-8")
    return 1 if metrics.get("error") else 0


def _version(job: dict, rank: int) -> dict:
    """One version: its results (saved by rank 0), memory, and its timing when asked."""
    import torch

    fn = _load_function(job["file"], job["function"], job["module"])
    device, seed = job["device"], job["seed"]
    metrics: dict[str, Any] = {"error": None}
    if job["results"]:
        _seed(seed)
        result = fn(device)  # the results compared; also the warm-up
        _sync(device)
        saved = _to_cpu(result)
        del result
        points, note = _sweep_points(fn, job["sweep"])
        metrics["memory"] = [_measure(fn, p, device, seed) for p in [{}, *points]]
        metrics["note"] = note
        if rank == 0:
            torch.save(saved, job["result"])
    if job["timing"]:  # Timer warms up itself
        _seed(seed)
        metrics["timing"] = _time(fn, device, job["min_time"], job["repeats"], job["threads"])
    return metrics


if __name__ == "__main__":
    if len(sys.argv) == 2:
        sys.exit(worker(sys.argv[1]))
    sys.exit("usage: python -m ptlint.verify.worker JOB.json (use `ptlint verify`)")
