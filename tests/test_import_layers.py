"""The package's layers hold: import-linter's contracts in pyproject.toml ([tool.importlinter]), which
docs/architecture.md explains. A module that imports from a layer above its own, the pool importing
the plugin, the plugin importing the pool's modules, or the submit side importing tracking fails here."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_every_import_contract_is_kept():
    lint_imports = Path(sys.executable).with_name("lint-imports")
    assert lint_imports.exists(), "lint-imports is missing: install the test extra (pip install -e '.[test]')"
    result = subprocess.run([str(lint_imports), "--no-cache"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout
