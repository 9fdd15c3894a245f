"""One finished run of config/test.yaml, shared by the SLURM, incremental-rerun and DVC tests, plus helpers to read
what a dry run would do.

Every run here imports fedavail from a private copy of src/ (PYTHONPATH), made once per test session: training jobs
take the package's training sources as inputs, and the working tree's copies may be edited while the tests run
(by you, or by whoever shares the tree), which would make "nothing to do" depend on the clock. The copy also lets the
incremental tests edit training code for real without touching the working tree.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from workflow_helpers import REPO

WORKFLOW_FILES = ("Snakefile", "workflow", "config", "profiles")
_state: dict = {}


def session_root() -> Path:
    if "root" not in _state:
        # Short and under /tmp: SLURM jobs and DVC read these paths; removed when the interpreter exits.
        root = Path(tempfile.mkdtemp(prefix="fedavail-tests-"))
        os.chmod(root, 0o755)
        import atexit

        atexit.register(shutil.rmtree, root, True)
        _state["root"] = root
    return _state["root"]


def private_src() -> Path:
    """A copy of src/ that fedavail is imported from in every run of these tests."""
    if "src" not in _state:
        src = session_root() / "src"
        shutil.copytree(REPO / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        _state["src"] = src
    return _state["src"]


def run_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(private_src()), *filter(None, [env.get("PYTHONPATH")])])
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("FEDAVAIL_SLURM_PARTITION", None)
    env.pop("FEDAVAIL_SLURM_GPU_PARTITION", None)
    env.pop("FEDAVAIL_SLURM_ACCOUNT", None)
    env.update(extra or {})
    return env


def copy_workflow_files(destination: Path) -> Path:
    destination.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, destination / name, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, destination / name)
    return destination


def snakemake(workdir: Path, *args: str, timeout: float = 600, check: bool = True,
              env: dict | None = None) -> subprocess.CompletedProcess:
    """Run Snakemake, killed hard at `timeout` (it ignores SIGTERM while jobs run)."""
    command = ["timeout", "-s", "KILL", str(int(timeout)), sys.executable, "-m", "snakemake", *args]
    result = subprocess.run(command, cwd=workdir, env=env or run_env(), capture_output=True, text=True,
                            timeout=timeout + 30)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed ({result.returncode}):\n{result.stdout[-5000:]}\n"
                             f"{result.stderr[-10000:]}")
    return result


def finished_run() -> Path:
    """A finished local run of config/test.yaml (made once per session; copy it before changing anything)."""
    if "finished" not in _state:
        workdir = copy_workflow_files(session_root() / "finished")
        snakemake(workdir, "--cores", "2", "--configfile", "config/test.yaml")
        _state["finished"] = workdir
    return _state["finished"]


def copy_finished_run(destination: Path) -> Path:
    """A copy of the finished run, outputs, logs and Snakemake's records included, with modification times kept."""
    shutil.copytree(finished_run(), destination, symlinks=True)
    return destination


_RULE = re.compile(r"^(?:local)?rule (\w+):$")
_WILDCARDS = re.compile(r"^\s+wildcards: (.*)$")


def planned_jobs(workdir: Path, *args: str, env: dict | None = None) -> set[str]:
    """The jobs a dry run would run, as 'rule' or 'rule[name=value,...]' (empty: nothing to be done)."""
    result = snakemake(workdir, "--dry-run", *args, env=env)
    jobs, rule, wildcards = set(), None, ""

    def flush():
        if rule is not None:
            jobs.add(f"{rule}[{wildcards}]" if wildcards else rule)

    for line in result.stdout.splitlines():
        if match := _RULE.match(line):
            flush()
            rule, wildcards = match.group(1), ""
        elif rule is not None and (match := _WILDCARDS.match(line)):
            wildcards = ",".join(part.strip() for part in match.group(1).split(","))
    flush()
    if not jobs:
        assert "Nothing to be done" in result.stdout + result.stderr, result.stdout + result.stderr
    return jobs


def comparable_results(workdir: Path, experiment: str = "tiny") -> dict[str, object]:
    """What must agree between two runs of an experiment: per-round metrics without wall-clock seconds, tables."""
    results: dict[str, object] = {}
    for path in sorted((workdir / "results/runs" / experiment).rglob("metrics.parquet")):
        frame = pd.read_parquet(path)
        results[str(path.relative_to(workdir))] = frame.drop(columns=["seconds"], errors="ignore")
    for path in sorted((workdir / "results/experiments" / experiment).glob("table.*")):
        results[str(path.relative_to(workdir))] = path.read_bytes()
    return results


def assert_same_results(actual: Path, expected: Path, experiment: str = "tiny", rtol: float | None = None) -> None:
    """Equal metrics and tables; with `rtol`, metrics equal to that tolerance (runs that vmapped their clients in
    calls of other widths: float32 kernels may sum in another order) and tables, which round them, not compared."""
    ours, theirs = comparable_results(actual, experiment), comparable_results(expected, experiment)
    assert sorted(ours) == sorted(theirs) and ours, (sorted(ours), sorted(theirs))
    for name, value in theirs.items():
        if isinstance(value, pd.DataFrame):
            pd.testing.assert_frame_equal(ours[name], value, check_exact=rtol is None, rtol=rtol or 0, obj=name)
        elif rtol is None:
            assert ours[name] == value, name
