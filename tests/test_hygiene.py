"""Rules the test suite holds itself to (checked on its own source)."""
from __future__ import annotations

import ast
import contextlib
import gc
import re
from pathlib import Path

CLOCKS = {"perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic", "monotonic_ns", "process_time"}
#: a clock name as a whole word: a call to a clock names it in the source (an ASCII source: elsewhere the parser's
#: NFKC normalisation of identifiers could hide the name, so those files are always parsed)
_CLOCK_WORD = re.compile(r"\b(?:" + "|".join(sorted(CLOCKS)) + r")\b")


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


@contextlib.contextmanager
def _no_cycle_collection():
    """The cyclic garbage collector paused: parsing allocates hundreds of thousands of AST nodes, and in a test process
    that holds numpy, scikit-learn and privsdr each collection they trigger scans that whole heap (two thirds of the
    parse time). AST nodes hold no cycles (no parent links): reference counting frees them as before."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _scoped_nodes(tree: ast.AST) -> dict[ast.AST, list[ast.AST]]:
    """Each scope (the module and every function) with the assignments and asserts anywhere inside it, nested
    functions included, as ``ast.walk`` of the scope would list them: collected in one walk of the tree."""
    inside: dict[ast.AST, list[ast.AST]] = {}
    todo: list[tuple[ast.AST, tuple[ast.AST, ...]]] = [(tree, ())]
    while todo:
        node, scopes = todo.pop()
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)):
            scopes = (*scopes, node)
            inside[node] = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Assert)):
            for scope in scopes:
                inside[scope].append(node)
        todo.extend((child, scopes) for child in ast.iter_child_nodes(node))
    return inside


def _timed_asserts(tree: ast.AST) -> list[int]:
    """Line numbers of asserts that read a clock, directly or through names assigned from a clock
    (``t0 = perf_counter(); elapsed = perf_counter() - t0; assert elapsed < 20``), per function.
    Each assignment's names and clock reads are read once; the fixed point then runs over those small sets."""
    lines = []
    facts: dict[ast.AST, tuple[set[str], bool, set[str]]] = {}  # node -> (names read, reads a clock, names assigned)
    for nodes in _scoped_nodes(tree).values():
        assignments = []
        for node in nodes:
            if node not in facts:
                read = node.test if isinstance(node, ast.Assert) else node.value
                if read is None:  # an annotation without a value assigns nothing
                    continue
                whole = node if isinstance(node, ast.Assert) else read
                targets = [] if isinstance(node, ast.Assert) else node.targets if isinstance(node, ast.Assign) else [node.target]
                facts[node] = ({n.id for n in ast.walk(whole) if isinstance(n, ast.Name)}, bool(_clock_reads(whole)),
                               {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)})
            if not isinstance(node, ast.Assert):
                assignments.append(facts[node])
        tainted: set[str] = set()
        changed = True
        while changed:  # names assigned from clock reads or from tainted names, to a fixed point
            changed = False
            for reads, clock, assigned in assignments:
                if (clock or reads & tainted) and not assigned <= tainted:
                    tainted |= assigned
                    changed = True
        lines += [node.lineno for node in nodes if isinstance(node, ast.Assert)
                  and (facts[node][1] or facts[node][0] & tainted)]
    return sorted(set(lines))


def _timed_asserts_in(source: str, filename: str = "<test>") -> list[int]:
    """``_timed_asserts`` of a source text; a text that names no clock has none and is not parsed (most test files)."""
    if source.isascii() and not _CLOCK_WORD.search(source):
        return []
    with _no_cycle_collection():
        tree = ast.parse(source, filename)
    return _timed_asserts(tree)


def test_no_test_asserts_wall_clock_time():
    """Speed is measured in benchmarks/ as ratios within one run; an assert on elapsed time fails under load."""
    offenders = []
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        offenders += [f"{path.name}:{line}" for line in _timed_asserts_in(path.read_text(), str(path))]
    assert not offenders, f"tests asserting wall-clock time: {offenders}"


def test_the_hygiene_check_sees_a_timed_assert(tmp_path):
    tree = ast.parse("import time\nt0 = time.perf_counter()\nassert time.perf_counter() - t0 < 20\n")
    asserts = [n for n in ast.walk(tree) if isinstance(n, ast.Assert)]
    assert _clock_reads(asserts[0]) == ["time.perf_counter"]


def test_the_hygiene_check_follows_a_clock_through_names():
    timed = "import time\nt0 = time.perf_counter()\nwork()\nelapsed = time.perf_counter() - t0\nassert elapsed < 20\n"
    assert _timed_asserts_in(timed) == [5]
    inside = "import time\ndef test_x():\n    start = time.monotonic()\n    spent = (time.monotonic() - start) * 1e3\n    ms = spent\n    assert ms < 5\n"
    assert _timed_asserts_in(inside) == [6]
    untimed = "import time\nt0 = time.perf_counter()\nresult = work()\nassert result == 3\n"
    assert _timed_asserts_in(untimed) == []
    bare = "from time import perf_counter as clock_read, monotonic\nt = monotonic()\nassert t < 3\n"
    assert _timed_asserts_in(bare) == [3]
    not_ascii = "from time import monotonic\ndef \u00e9tape():\n    t = monotonic()\n    assert t < 3\n"
    assert _timed_asserts_in(not_ascii) == [4]


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
    sources: dict[str, str] = {}

    def source(path: str) -> str:  # each file read once, not once per mutant
        if path not in sources:
            sources[path] = (root / path).read_text()
        return sources[path]

    stale = [f"{m.name}: {source(path).count(old)} matches in {path}" for m in module.MUTANTS
             for path, old, _ in m.edits if source(path).count(old) != 1]
    missing = [f"{m.name}: {t}" for m in module.MUTANTS for t in m.tests if not (root / t.split("::")[0]).exists()]  # a file or a node id
    broken = []
    for m in module.MUTANTS:  # a mutant that does not parse would be "caught" by a SyntaxError, not by a test
        texts: dict[str, str] = {}
        for path, old, new in m.edits:
            texts[path] = texts.get(path, source(path)).replace(old, new)
        for path, text in texts.items():
            try:  # compiled as the import would (a code object, no AST objects built): a SyntaxError is what it raises
                with _no_cycle_collection():
                    compile(text, path, "exec", dont_inherit=True)
            except SyntaxError as exc:
                broken.append(f"{m.name}: {path}: {exc}")
    names = [m.name for m in module.MUTANTS]
    assert not stale and not missing and not broken and len(names) == len(set(names)), (stale, missing, broken)
