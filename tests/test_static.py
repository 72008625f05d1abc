"""The static checks of issue 17 run inside the test command: ruff (pyflakes, import order, pyupgrade for
Python 3.10, bugbear) and mypy (strict on core/accounting/mechanisms/plan, default elsewhere), both
configured in pyproject.toml. The tools are in the test extra: a missing tool is a broken install and fails."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    exe = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if exe is None:
        pytest.fail(f"{name} not installed: install the test extra (pip install -e '.[test]')")
    return exe


def test_ruff_is_clean():
    result = subprocess.run([_tool("ruff"), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean():
    # the configuration (files, strict modules, third-party overrides) is [tool.mypy] in pyproject.toml
    result = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout
