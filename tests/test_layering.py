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
