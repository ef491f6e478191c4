"""Imports point one way: common < variants < experiments < analysis < attnlab, the command line on top."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imported(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_experiments_never_import_analysis():
    upward = {str(path.relative_to(ROOT)): sorted(name for name in _imported(path) if name.split(".")[0] == "analysis")
              for path in (ROOT / "experiments").rglob("*.py")}
    assert {path: names for path, names in upward.items() if names} == {}


def test_importing_analysis_does_not_load_the_training_loop():
    code = "import analysis, sys; print('experiments.run.train' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.strip() == "False"
