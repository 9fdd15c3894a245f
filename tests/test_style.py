"""Code-shape checks that CI runs with the tests: the rule files are snakefmt clean."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_rule_files_are_snakefmt_clean():
    snakefmt = shutil.which("snakefmt") or str(Path(sys.executable).parent / "snakefmt")
    if not Path(snakefmt).exists():
        pytest.fail("snakefmt is not installed: it is part of the test extra (pyproject.toml)")
    result = subprocess.run([snakefmt, "--check", "--diff", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
