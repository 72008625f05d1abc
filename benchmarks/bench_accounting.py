"""Benchmark privsdr's accounting: preflight pricing, execution overhead and import cost.

    python benchmarks/bench_accounting.py [--quick] [--nodes N] [--limit SECONDS] [--json PATH]

Figures (all medians of repeated ``time.perf_counter`` measurements inside one process, and
compared as ratios within the same run; nothing here is a pass/fail test):

1. ``Ledger.preflight`` of an N-node Gaussian plan (default N = 1000) under each accountant, with
   noise multipliers that are identical (50), two-valued (40 or 60) or all distinct (uniform 40..60).
2. A full ``Run`` of an N-node plan releasing length-10 vectors (identical multipliers under each
   accountant; distinct multipliers under ``basic`` and ``best``), split into
   enter (reserve + spawn generators), the N releases (charge + noise) and exit (report build,
   which composes the totals under every accountant), against the same noise drawn with bare numpy.
3. ``import privsdr`` in fresh interpreters: whether it loads ``dp_accounting``, and its time
   against ``import numpy, scipy``.
4. The tight calibration of a certified DPSIR plan (3 Gaussian nodes; ``DPSIR(...).plan(n, p)`` under ``best``,
   issue 35's "3-4 ms per node cold"): cold in this process (each repeat at a unique budget epsilon 1 + k*1e-7, so
   no memoised factor or curve applies), and first in a fresh interpreter (lazy imports included), with whether
   that loads ``dp_accounting``. Its cold figure is also given in CPU time (``time.process_time``), steadier than wall
   time when the machine is loaded.

privsdr memoises Gaussian profiles and RDP/PLD compositions by event, so 1 and 2 are reported
twice: *cold* (each repeat on a fresh plan whose multipliers are scaled by a unique 1 + k*1e-7, so
no memoised result applies) and *warm* (the same plan again). One measurement that runs longer
than ``--limit`` seconds is interrupted and reported as such.
"""
from __future__ import annotations

import argparse
import gc
import hashlib
import itertools
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # benchmark the source tree next to this script
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from privsdr import Budget, Ledger, Plan, Run, Sensitivity, __version__  # noqa: E402
from privsdr.plan.graph import CalibratedPlan  # noqa: E402

ACCOUNTANTS = ("basic", "advanced", "rdp", "pld", "best")
BUDGET = Budget(1e3, 1e-5)  # fits 1000 nodes at z >= 40 with delta share 1e-9 under every accountant
NODE_DELTA = 1e-9
VECTOR_LEN = 10


class _Timeout(Exception):
    pass


def _on_alarm(signum: int, frame: object) -> None:
    raise _Timeout


def time_once(fn: Callable[[], object], limit: float) -> float | None:
    """Seconds taken by ``fn()``, or ``None`` if it was interrupted after ``limit`` seconds."""
    gc.collect()
    use_alarm = hasattr(signal, "SIGALRM")
    if use_alarm:
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, limit)
    start = time.perf_counter()
    try:
        fn()
    except _Timeout:
        return None
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    return time.perf_counter() - start


def cpu_once(fn: Callable[[], object]) -> float:
    """CPU seconds of this process taken by ``fn()`` (``time.process_time``): on a loaded machine, where wall time
    counts the waits for a core, the steadier figure."""
    gc.collect()
    start = time.process_time()
    fn()
    return time.process_time() - start


def measure(make: Callable[[], Callable[[], object]], repeats: int, limit: float, budget: float) -> dict[str, Any]:
    """Median of up to ``repeats`` timings of ``make()()`` (``make`` itself is not timed), stopping
    early once ``budget`` seconds have been spent or when one timing exceeds ``limit``."""
    times: list[float] = []
    for _ in range(repeats):
        fn = make()
        t = time_once(fn, limit)
        if t is None:
            return {"seconds": None, "runs": len(times), "timed_out_after": limit}
        times.append(t)
        if sum(times) > budget:
            break
    return {"seconds": statistics.median(times), "runs": len(times), "timed_out_after": None}


def multipliers(kind: str, n: int) -> list[float]:
    rng = np.random.default_rng(12345)
    if kind == "identical":
        return [50.0] * n
    if kind == "two-valued":
        return [float(z) for z in rng.choice([40.0, 60.0], size=n)]
    if kind == "distinct":
        return [float(z) for z in rng.uniform(40.0, 60.0, size=n)]
    raise ValueError(kind)


_FRESH = itertools.count(1)


def gaussian_plan(zs: Sequence[float], fresh: bool = False) -> CalibratedPlan:
    """The plan with multipliers ``zs``; ``fresh=True`` scales them by a unique 1 + k*1e-7 so that no
    memoised result (privsdr caches compositions by event) can be reused: a cold measurement."""
    scale = 1.0 + next(_FRESH) * 1e-7 if fresh else 1.0
    plan = Plan("bench", "replace_one")
    for i, z in enumerate(zs):
        plan.add(f"n{i}", "gaussian", Sensitivity(1.0, "l2"), noise_multiplier=z * scale, delta=NODE_DELTA)
    return plan.allocate(BUDGET)


def cold_and_warm(
    zs: Sequence[float], task: Callable[[CalibratedPlan], object], repeats: int, limit: float, budget: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Time ``task`` on a fresh plan each repeat (cold), then again and again on the last one (warm)."""
    last: list[CalibratedPlan] = []

    def make_cold() -> Callable[[], object]:
        last[:] = [gaussian_plan(zs, fresh=True)]
        return lambda: task(last[0])

    cold = measure(make_cold, repeats, limit, budget)
    if cold["seconds"] is None:
        return cold, {"seconds": None, "runs": 0, "timed_out_after": None}
    return cold, measure(lambda: (lambda: task(last[0])), repeats, limit, budget)


def preflight(accountant: str, plan: CalibratedPlan) -> Any:
    return Ledger(BUDGET, accountant=accountant).preflight(plan)


# -- 1. preflight ----------------------------------------------------------------------------------
def bench_preflight(n: int, repeats: int, limit: float, budget: float) -> list[dict[str, Any]]:
    rows = []
    for kind in ("identical", "two-valued", "distinct"):
        zs = multipliers(kind, n)
        for acc in ACCOUNTANTS:
            task = partial(preflight, acc)
            cold, warm = cold_and_warm(zs, task, repeats, limit, budget)
            rows.append({"variant": kind, "accountant": acc, "nodes": n, "cold": cold, "warm": warm})
        base = next(r["cold"]["seconds"] for r in rows if r["variant"] == kind and r["accountant"] == "basic")
        for r in rows:
            if r["variant"] == kind:
                for m in (r["cold"], r["warm"]):
                    m["per_node_ms"] = None if m["seconds"] is None else 1e3 * m["seconds"] / n
                r["cold_vs_basic"] = None if r["cold"]["seconds"] is None or not base else r["cold"]["seconds"] / base
    return rows


# -- 2. execution overhead -------------------------------------------------------------------------
def run_once(plan: CalibratedPlan, accountant: str, values: list[np.ndarray]) -> dict[str, float]:
    ledger = Ledger(BUDGET, accountant=accountant)
    names = list(plan.nodes)
    t0 = time.perf_counter()
    with Run(plan, ledger, random_state=0) as run:
        t1 = time.perf_counter()
        for name, value in zip(names, values, strict=True):
            run.release(name, value)
        t2 = time.perf_counter()
    t3 = time.perf_counter()
    assert run.report is not None
    return {"enter": t1 - t0, "releases": t2 - t1, "exit": t3 - t2, "total": t3 - t0}


def run_and_keep(parts: list[dict[str, float]], accountant: str, values: list[np.ndarray], plan: CalibratedPlan) -> None:
    parts.append(run_once(plan, accountant, values))


def bare_numpy(values: list[np.ndarray], sigma: float) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [v + rng.standard_normal(VECTOR_LEN) * sigma for v in values]


def bench_execution(n: int, repeats: int, limit: float, budget: float) -> dict[str, Any]:
    values = [np.random.default_rng(i).standard_normal(VECTOR_LEN) for i in range(n)]
    sigma = gaussian_plan(multipliers("identical", n)).specs["n0"].scale
    numpy_s = measure(lambda: (lambda: bare_numpy(values, sigma)), max(repeats, 5), limit, budget)["seconds"]
    rows = []
    for kind, acc in [("identical", a) for a in ACCOUNTANTS] + [("distinct", "basic"), ("distinct", "best")]:
        zs = multipliers(kind, n)
        parts: list[dict[str, float]] = []
        task = partial(run_and_keep, parts, acc, values)
        cold, warm = cold_and_warm(zs, task, repeats, limit, budget)
        # parts holds the cold runs first, then the warm ones
        for state, m, runs in (("cold", cold, parts[: cold["runs"]]), ("warm", warm, parts[cold["runs"] :])):
            row: dict[str, Any] = {"multipliers": kind, "accountant": acc, "cache": state, "runs": len(runs), "timed_out_after": m["timed_out_after"]}
            for key in ("enter", "releases", "exit", "total"):
                row[key] = statistics.median(p[key] for p in runs) if runs else None
            if runs:
                row["per_node_overhead_ms"] = 1e3 * (row["total"] - numpy_s) / n
                row["per_node_release_overhead_ms"] = 1e3 * (row["releases"] - numpy_s) / n
                row["ratio_total_vs_numpy"] = row["total"] / numpy_s
                row["ratio_releases_vs_numpy"] = row["releases"] / numpy_s
            rows.append(row)
    return {"nodes": n, "vector_len": VECTOR_LEN, "numpy_seconds": numpy_s, "rows": rows}


# -- 3. imports ------------------------------------------------------------------------------------
def _python(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    return out.stdout.strip()


def _import_seconds(modules: str, repeats: int) -> float:
    code = f"import time; t = time.perf_counter(); import {modules}; print(time.perf_counter() - t)"
    return statistics.median(float(_python(code)) for _ in range(repeats))


def bench_imports(repeats: int) -> dict[str, Any]:
    loads = _python("import sys, privsdr; print('dp_accounting' in sys.modules)") == "True"
    scipy_subs = _python(
        "import sys, privsdr; print(' '.join(sorted({m.split('.')[1] for m in sys.modules if m.startswith('scipy.') and not m.split('.')[1].startswith('_')})))"
    ).split()
    privsdr_s = _import_seconds("privsdr", repeats)
    baseline_s = _import_seconds("numpy, scipy", repeats)
    # privsdr.accounting.gaussian imports scipy.optimize and scipy.special at module level
    needed_s = _import_seconds("numpy, scipy.optimize, scipy.special", repeats)
    return {
        "privsdr_imports_dp_accounting": loads,
        "scipy_subpackages_loaded_by_privsdr": scipy_subs,
        "privsdr_seconds": privsdr_s,
        "numpy_scipy_seconds": baseline_s,
        "numpy_scipy_optimize_special_seconds": needed_s,
        "ratio": privsdr_s / baseline_s,
        "repeats": repeats,
    }


def source_digest() -> str:
    """Short sha256 of privsdr's .py sources (and the git commit), to tie figures to the code measured."""
    h = hashlib.sha256()
    for path in sorted((ROOT / "privsdr").rglob("*.py")):
        h.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    digest = h.hexdigest()[:12]
    try:
        git = ["git", "-C", str(ROOT)]
        commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run([*git, "status", "--porcelain", "--", "privsdr"], capture_output=True, text=True, check=True).stdout.strip()
        return f"{digest}, git {commit}{'+dirty' if dirty else ''}"
    except (OSError, subprocess.CalledProcessError):
        return digest


# -- 4. a DPSIR plan's tight calibration -----------------------------------------------------------
DPSIR_PLAN = "DPSIR(2, bound=1.0, cut_points=[-0.5, 0.0, 0.5], budget=({eps!r}, 1e-5)).plan(10000, 10)"


def dpsir_plan(eps: float) -> CalibratedPlan:
    from privsdr import DPSIR

    return eval(DPSIR_PLAN.format(eps=eps), {"DPSIR": DPSIR})  # noqa: S307 - our own constant


def bench_dpsir_plan(repeats: int) -> dict[str, Any]:
    dpsir_plan(1.0)  # warm-up: the calibration's lazy imports (scipy.optimize, scipy.special)
    nodes = len(dpsir_plan(1.0).nodes)
    fresh = itertools.count(1)
    cold = [time_once(lambda: dpsir_plan(1.0 + next(fresh) * 1e-7), 60.0) for _ in range(max(repeats, 5) * 4)]
    cpu = [cpu_once(lambda: dpsir_plan(1.0 + next(fresh) * 1e-7)) for _ in range(max(repeats, 5) * 4)]
    code = (
        "import sys, time; from privsdr import DPSIR; t = time.perf_counter(); "
        f"{DPSIR_PLAN.format(eps=1.0)}; print(time.perf_counter() - t, 'dp_accounting' in sys.modules)"
    )
    firsts = [_python(code).split() for _ in range(repeats)]
    return {
        "nodes": nodes,
        "cold_seconds": statistics.median(t for t in cold if t is not None),
        "cold_min_seconds": min(t for t in cold if t is not None),
        "cold_runs": len(cold),
        "cold_cpu_seconds": statistics.median(cpu),
        "cold_cpu_min_seconds": min(cpu),
        "first_in_process_seconds": statistics.median(float(f[0]) for f in firsts),
        "first_loads_dp_accounting": firsts[0][1] == "True",
        "first_runs": len(firsts),
    }


# -- output ----------------------------------------------------------------------------------------
def _f(x: float | None, fmt: str) -> str:
    return format(x, fmt) if x is not None else format("-", ">" + fmt.split(".")[0])


def _cell(m: dict[str, Any]) -> str:
    """``seconds ms/node runs`` of one measurement, or why there is none."""
    if m["seconds"] is None:
        why = f"TIMED OUT >{m['timed_out_after']:g}s" if m["timed_out_after"] else "(not run)"
        return f"{why:>26}"
    return f"{m['seconds']:9.4f} {m['per_node_ms']:9.4f} {m['runs']:>5}"


def print_tables(results: dict[str, Any]) -> None:
    meta = results["meta"]
    print(f"privsdr {meta['privsdr']} (source {meta['source_digest']}) | python {meta['python']} | numpy {meta['numpy']} | dp-accounting {meta['dp_accounting']} | {meta['machine']}")
    print(f"mode: {'quick' if meta['quick'] else 'full'}; repeats <= {meta['repeats']}; per-measurement limit {meta['limit']:g} s")
    print("cold = each repeat on a fresh plan (multipliers x (1 + k*1e-7), so no memoised result applies);")
    print("warm = the same plan again (what repeated fits of one plan shape pay).\n")

    print(f"1. Ledger.preflight of a {meta['nodes']}-node Gaussian plan (median seconds; x basic = cold ratio to 'basic', same plan)")
    head = f"{'seconds':>9} {'ms/node':>9} {'runs':>5}"
    print(f"   {'':<11} {'':<9} {'--------------- cold':>26}  {'--------------- warm':>26}")
    print(f"   {'multipliers':<11} {'accountant':<9} {head}  {head} {'x basic':>8}")
    for r in results["preflight"]:
        print(f"   {r['variant']:<11} {r['accountant']:<9} {_cell(r['cold'])}  {_cell(r['warm'])} {_f(r['cold_vs_basic'], '8.1f')}")

    ex = results["execution"]
    print(f"\n2. Run of a {ex['nodes']}-node plan, each node releasing a length-{ex['vector_len']} vector (median seconds)")
    print(f"   bare numpy baseline (value + rng.standard_normal({ex['vector_len']}) * sigma, x{ex['nodes']}): {ex['numpy_seconds']:.4f} s")
    print(f"   {'multipliers':<11} {'ledger':<9} {'cache':<5} {'enter':>8} {'releases':>9} {'exit':>8} {'total':>8} {'ms/node':>8} {'rel ms/node':>11} {'x numpy':>8} {'runs':>5}")
    for r in ex["rows"]:
        if r["total"] is None:
            why = f"TIMED OUT after {r['timed_out_after']:g} s" if r["timed_out_after"] else "(not run)"
            print(f"   {r['multipliers']:<11} {r['accountant']:<9} {r['cache']:<5} {why}")
            continue
        print(
            f"   {r['multipliers']:<11} {r['accountant']:<9} {r['cache']:<5} {r['enter']:8.4f} {r['releases']:9.4f} {r['exit']:8.4f} {r['total']:8.4f}"
            f" {r['per_node_overhead_ms']:8.3f} {r['per_node_release_overhead_ms']:11.4f} {r['ratio_total_vs_numpy']:8.0f} {r['runs']:>5}"
        )
    print("   enter = reserve (prices the plan) + spawn generators; releases = N x (validate + charge + noise);")
    print("   exit = close reservation + build the report (totals under basic/advanced/rdp/pld + the ledger's own).")
    print("   ms/node = (total - numpy) / N; rel ms/node = (releases - numpy) / N; goal: ms/node < 1.")

    im = results["imports"]
    print(f"\n3. import privsdr in a fresh interpreter (median of {im['repeats']})")
    print(f"   loads dp_accounting: {im['privsdr_imports_dp_accounting']}")
    print(f"   import privsdr:                               {im['privsdr_seconds']:.3f} s")
    print(f"   import numpy, scipy:                          {im['numpy_scipy_seconds']:.3f} s  (privsdr = x{im['ratio']:.1f})")
    print(f"   import numpy, scipy.optimize, scipy.special:  {im['numpy_scipy_optimize_special_seconds']:.3f} s  (loaded lazily by the first calibration)")
    print(f"   scipy subpackages loaded by privsdr: {', '.join(im['scipy_subpackages_loaded_by_privsdr']) or 'none'}")

    dp = results["dpsir_plan"]
    n = dp["nodes"]
    print(f"\n4. tight calibration of a certified DPSIR plan ({n} Gaussian nodes, best): {DPSIR_PLAN.format(eps=1.0)}")
    print(f"   cold (fresh budget each time), median of {dp['cold_runs']}: {1e3 * dp['cold_seconds']:.2f} ms = {1e3 * dp['cold_seconds'] / n:.2f} ms/node"
          f" (min {1e3 * dp['cold_min_seconds'] / n:.2f} ms/node); goal: < 1 ms/node")
    print(f"   the same in CPU time (process_time), median of {dp['cold_runs']}: {1e3 * dp['cold_cpu_seconds'] / n:.2f} ms/node"
          f" (min {1e3 * dp['cold_cpu_min_seconds'] / n:.2f} ms/node)")
    print(f"   first in a fresh interpreter (lazy imports included), median of {dp['first_runs']}: {1e3 * dp['first_in_process_seconds']:.1f} ms;"
          f" loads dp_accounting: {dp['first_loads_dp_accounting']}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, 10 s limit per measurement")
    parser.add_argument("--nodes", type=int, default=1000, help="nodes per plan (default 1000)")
    parser.add_argument("--limit", type=float, default=None, help="interrupt one measurement after this many seconds (default 60; 10 with --quick)")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON to PATH ('-' for stdout)")
    args = parser.parse_args(argv)
    repeats = 2 if args.quick else 7
    limit = args.limit or (10.0 if args.quick else 60.0)
    budget = 3.0 if args.quick else 30.0  # seconds of repeats per cell before settling for fewer runs

    import_info = bench_imports(3 if args.quick else 5)  # before anything here imports dp_accounting
    Ledger(BUDGET, accountant="best").preflight(gaussian_plan([50.0, 40.0]))  # warm-up: lazy dp_accounting import

    from importlib.metadata import version

    results: dict[str, Any] = {
        "meta": {
            "privsdr": __version__,
            "source_digest": source_digest(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "dp_accounting": version("dp-accounting"),
            "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
            "quick": args.quick,
            "nodes": args.nodes,
            "repeats": repeats,
            "limit": limit,
            "budget": list(BUDGET),
            "node_delta": NODE_DELTA,
        },
        "preflight": bench_preflight(args.nodes, repeats, limit, budget),
        "execution": bench_execution(args.nodes, repeats, limit, budget),
        "imports": import_info,
        "dpsir_plan": bench_dpsir_plan(3 if args.quick else 5),
    }
    print_tables(results)
    if args.json == "-":
        print(json.dumps(results, indent=2))
    elif args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
        print(f"\nJSON written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
