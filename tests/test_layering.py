"""The layering of DESIGN.md is enforced by import-linter contracts in pyproject.toml."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_hold():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(exe).exists():
        pytest.fail("lint-imports not installed: install the test extra (pip install -e '.[test]')")
    result = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_import_privsdr_does_not_import_dp_accounting():
    code = "import sys, privsdr; print('dp_accounting' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


def test_core_modules_import_nothing_of_privsdr():
    """Belt and braces beside the contract: an AST scan of privsdr/core."""
    import ast

    for path in (ROOT / "privsdr" / "core").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 2:
                pytest.fail(f"{path.name} imports {node.module!r} from outside privsdr.core")
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                assert not any(n.startswith(("privsdr", "dp_accounting")) for n in names), path.name


def _layers_contract() -> list[str]:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    [layers] = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    return [name.strip() for layer in layers for name in layer.split("|")]


def test_the_layers_name_every_top_level_module():
    """A module the layers leave out can import anything and be imported by anything: a circle through it would not show."""
    named = set(_layers_contract())
    top = {f"privsdr.{p.stem}" for p in (ROOT / "privsdr").glob("*.py") if p.stem != "__init__"}
    top |= {f"privsdr.{p.parent.name}" for p in (ROOT / "privsdr").glob("*/__init__.py")}
    assert top - named == set(), f"not in the layers of pyproject.toml: {sorted(top - named)}"
    assert named - top == set(), f"layers that name no module: {sorted(named - top)}"


def test_no_module_of_privsdr_imports_itself_in_a_circle():
    """No import circle between any two modules (the strongly connected components of the import graph, imports under
    TYPE_CHECKING left out as import-linter leaves them out): issue 34 removed the last ones."""
    import grimp

    graph = grimp.build_graph("privsdr", include_external_packages=False, exclude_type_checking_imports=True)
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for m in modules:
        if m not in index:
            visit(m)
    assert circles == [], f"import circles: {circles}"
