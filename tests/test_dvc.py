"""DVC saves recomputation: results tracked and pushed from one clone are pulled into a fresh clone, where after the
README's follow-up (`make dvc-pull`: dvc pull, then snakemake --touch) Snakemake has nothing to do and every tracked
file is byte-identical.

Clone 1 gets its finished run of config/test.yaml by copying the session's run (outputs, logs and Snakemake's records,
modification times kept), which is the same as running it there; a dry run checks it is complete before tracking.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tiny_run import finished_run, planned_jobs, run_env
from workflow_helpers import REPO

pytestmark = pytest.mark.timeout(600)

REPO_FILES = ("Snakefile", "workflow", "config", "profiles", "Makefile", "README.md", ".gitignore", ".dvc/config",
              ".dvc/.gitignore", ".dvcignore")
TRACKED = ("data/prepared", "data/partitions", "data/traces", "results")
VENV = str(Path(sys.executable).parent.parent)
# The clones use this venv as it is: `make -o` keeps make from (re)installing it from the clone.
MAKE = ("make", "-o", f"{VENV}/.installed", f"VENV={VENV}")
TEST_CONFIG = "SNAKEMAKE_ARGS=--configfile config/test.yaml"


def sh(cwd: Path, *command: str, env: dict | None = None) -> str:
    env = env or run_env({"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
                          "GIT_COMMITTER_EMAIL": "t@example.org", "DVC_NO_ANALYTICS": "1"})
    result = subprocess.run(list(command), cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes()
            for folder in TRACKED for p in sorted((root / folder).rglob("*")) if p.is_file()}


def test_pushed_results_pulled_into_a_fresh_clone_need_no_rerun(tmp_path):
    seed = tmp_path / "seed"
    for name in REPO_FILES:
        source, target = REPO / name, seed / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, target)
    sh(seed, "git", "init", "-q", "-b", "main")
    sh(seed, "git", "add", "-A")
    sh(seed, "git", "commit", "-q", "-m", "workflow")
    origin = tmp_path / "origin.git"
    sh(tmp_path, "git", "clone", "-q", "--bare", str(seed), str(origin))
    storage = tmp_path / "dvc-storage"

    # Clone 1: a finished run, tracked, committed and pushed (the README's commands).
    first = tmp_path / "first"
    sh(tmp_path, "git", "clone", "-q", str(origin), str(first))
    run = finished_run()
    for name in ("data", "results", "logs", ".snakemake"):
        shutil.copytree(run / name, first / name, symlinks=True)
    assert planned_jobs(first, "--configfile", "config/test.yaml") == set()
    sh(first, *MAKE, "dvc-track")
    sh(first, "dvc", "remote", "add", "-d", "storage", str(storage))
    sh(first, "git", "add", "*.dvc", ".dvc/config")
    committed = sh(first, "git", "diff", "--cached", "--name-only").split()
    assert sorted(committed) == sorted([".dvc/config", *(f"{folder}.dvc" for folder in TRACKED)])
    sh(first, "git", "commit", "-q", "-m", "results of config/test.yaml")
    assert sh(first, "git", "status", "--porcelain") == ""  # DVC needed no .gitignore changes
    sh(first, "git", "push", "-q", "origin", "main")
    sh(first, "dvc", "push")
    # Tracking changed nothing for Snakemake in the clone that made the run.
    assert planned_jobs(first, "--configfile", "config/test.yaml") == set()

    # Clone 2: fresh, no Snakemake records; pull and touch, then nothing to do and the same bytes.
    second = tmp_path / "second"
    sh(tmp_path, "git", "clone", "-q", str(origin), str(second))
    assert not (second / "results").exists()
    sh(second, *MAKE, "dvc-pull", TEST_CONFIG)
    assert planned_jobs(second, "--configfile", "config/test.yaml") == set()
    ours, theirs = files_under(second), files_under(first)
    assert ours.keys() == theirs.keys() and len(ours) > 10
    assert all(ours[name] == theirs[name] for name in theirs), [n for n in theirs if ours[n] != theirs[n]]
