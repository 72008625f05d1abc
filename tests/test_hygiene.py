"""Rules the test suite holds itself to (checked on its own source)."""
from __future__ import annotations

import ast
from pathlib import Path

CLOCKS = {"perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic", "monotonic_ns", "process_time"}


def _clock_reads(node: ast.AST) -> list[str]:
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
            if name in CLOCKS and owner in ("time", ""):
                found.append(f"{owner}.{name}" if owner else name)
    return found


def test_no_test_asserts_wall_clock_time():
    """Speed is measured in benchmarks/ as ratios within one run; an assert on elapsed time fails under load."""
    offenders = []
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Assert) and _clock_reads(node):
                offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders, f"tests asserting wall-clock time: {offenders}"


def test_the_hygiene_check_sees_a_timed_assert(tmp_path):
    tree = ast.parse("import time\nt0 = time.perf_counter()\nassert time.perf_counter() - t0 < 20\n")
    asserts = [n for n in ast.walk(tree) if isinstance(n, ast.Assert)]
    assert _clock_reads(asserts[0]) == ["time.perf_counter"]
