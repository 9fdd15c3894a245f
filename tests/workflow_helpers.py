"""Running the real Snakefile from tests: a temporary copy of the workflow, the venv's snakemake and fedavail."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKFLOW_FILES = ("Snakefile", "workflow", "config")


def copy_workflow(destination: Path) -> Path:
    destination.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, destination / name)
        else:
            shutil.copy2(source, destination / name)
    return destination


def snakemake(workdir: Path, *args: str, timeout: int = 600, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    result = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=workdir, env=env, capture_output=True,
                            text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n"
                             f"{result.stderr}")
    return result
