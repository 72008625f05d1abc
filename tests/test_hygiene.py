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


def _timed_asserts(tree: ast.AST) -> list[int]:
    """Line numbers of asserts that read a clock, directly or through names assigned from a clock
    (``t0 = perf_counter(); elapsed = perf_counter() - t0; assert elapsed < 20``), per function."""
    lines = []
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in scopes:
        tainted: set[str] = set()
        changed = True
        while changed:  # names assigned from clock reads or from tainted names, to a fixed point
            changed = False
            for node in ast.walk(scope):
                if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                    reads = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
                    if _clock_reads(node.value) or reads & tainted:
                        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                        for t in targets:
                            for name in (n.id for n in ast.walk(t) if isinstance(n, ast.Name)):
                                if name not in tainted:
                                    tainted.add(name)
                                    changed = True
        for node in ast.walk(scope):
            if isinstance(node, ast.Assert):
                reads = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                if _clock_reads(node) or reads & tainted:
                    lines.append(node.lineno)
    return sorted(set(lines))


def test_no_test_asserts_wall_clock_time():
    """Speed is measured in benchmarks/ as ratios within one run; an assert on elapsed time fails under load."""
    offenders = []
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        offenders += [f"{path.name}:{line}" for line in _timed_asserts(ast.parse(path.read_text(), str(path)))]
    assert not offenders, f"tests asserting wall-clock time: {offenders}"


def test_the_hygiene_check_sees_a_timed_assert(tmp_path):
    tree = ast.parse("import time\nt0 = time.perf_counter()\nassert time.perf_counter() - t0 < 20\n")
    asserts = [n for n in ast.walk(tree) if isinstance(n, ast.Assert)]
    assert _clock_reads(asserts[0]) == ["time.perf_counter"]


def test_the_hygiene_check_follows_a_clock_through_names():
    timed = "import time\nt0 = time.perf_counter()\nwork()\nelapsed = time.perf_counter() - t0\nassert elapsed < 20\n"
    assert _timed_asserts(ast.parse(timed)) == [5]
    inside = "import time\ndef test_x():\n    start = time.monotonic()\n    spent = (time.monotonic() - start) * 1e3\n    ms = spent\n    assert ms < 5\n"
    assert _timed_asserts(ast.parse(inside)) == [6]
    untimed = "import time\nt0 = time.perf_counter()\nresult = work()\nassert result == 3\n"
    assert _timed_asserts(ast.parse(untimed)) == []


def test_every_mutant_of_the_mutation_check_still_applies():
    """benchmarks/mutants.py edits source text; a refactor that moves that text would silently turn a
    mutant into "not applied" (three did once). Each must match its file exactly once, and each test
    selection must exist."""
    import importlib.util
    import sys

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("privsdr_mutants", root / "benchmarks" / "mutants.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    stale = [f"{m.name}: {(root / path).read_text().count(old)} matches in {path}" for m in module.MUTANTS
             for path, old, _ in m.edits if (root / path).read_text().count(old) != 1]
    missing = [f"{m.name}: {t}" for m in module.MUTANTS for t in m.tests if not (root / t.split("::")[0]).exists()]  # a file or a node id
    broken = []
    for m in module.MUTANTS:  # a mutant that does not parse would be "caught" by a SyntaxError, not by a test
        texts: dict[str, str] = {}
        for path, old, new in m.edits:
            texts[path] = texts.get(path, (root / path).read_text()).replace(old, new)
        for path, text in texts.items():
            try:
                ast.parse(text)
            except SyntaxError as exc:
                broken.append(f"{m.name}: {path}: {exc}")
    names = [m.name for m in module.MUTANTS]
    assert not stale and not missing and not broken and len(names) == len(set(names)), (stale, missing, broken)
