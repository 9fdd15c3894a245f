"""End to end: the real Snakefile on config/test.yaml, then an up-to-date dry run; and invalid configs rejected."""

import pandas as pd
import pytest
import yaml

from fedavail.plan.load import load_config
from workflow_helpers import REPO, copy_workflow, snakemake


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("workflow"))
    snakemake(workdir, "--cores", "2", "--configfile", "config/test.yaml")
    return workdir


def test_run_produces_table_and_figure(finished_run):
    table = pd.read_csv(finished_run / "results/experiments/tiny/table.csv")
    assert list(table["algorithm"]) == ["fedavg_active", "fedavg_known"]
    assert table["seeds"].tolist() == [2, 2]
    # 12 tiny rounds already learn something: far from the 10% of a constant guess.
    assert (table["test_acc_mean"] > 0.2).all()
    markdown = (finished_run / "results/experiments/tiny/table.md").read_text()
    assert "fedavg_active" in markdown and "±" in markdown
    figure = finished_run / "results/experiments/tiny/accuracy.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and figure.stat().st_size > 10_000
    for algorithm in ("fedavg_active", "fedavg_known"):
        for seed in (0, 1):
            log = finished_run / f"logs/train/tiny/{algorithm}/seed{seed}.log"
            assert "round 15/15" in log.read_text()


def test_second_dry_run_has_nothing_to_do(finished_run):
    result = snakemake(finished_run, "-n", "--configfile", "config/test.yaml")
    assert "Nothing to be done" in result.stdout + result.stderr


def test_plain_runs_replan_waiting_jobs_on_a_10_s_timer(monkeypatch):
    """Without --workflow-profile Snakemake reads profiles/default, whose job rate limit sets how often it re-plans
    waiting jobs; an explicit workflow profile replaces it."""
    from snakemake.cli import parse_args

    monkeypatch.chdir(REPO)
    _, args = parse_args(["--cores", "1", "--dry-run"])
    assert args.max_jobs_per_timespan.timespan == 10 and args.max_jobs_per_timespan.max_jobs == 1000
    _, args = parse_args(["--cores", "1", "--dry-run", "--workflow-profile", "profiles/local-gpu"])
    assert args.max_jobs_per_timespan.timespan == 10


def test_lint_passes():
    result = snakemake(REPO, "--lint", check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def _config_with(tmp_path, edit):
    config = load_config([REPO / "config/test.yaml"])
    edit(config)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("edit, key", [
    (lambda c: c["algorithms"]["fedavg_active"].update(algorithm="fedmagic"), "algorithm"),
    (lambda c: c["partitions"]["mnist5k_dir0.5"].update(alpha=0), "alpha"),
    (lambda c: c["traces"]["stationary"].update(model="bernoulli", p=1.5), "p"),
    (lambda c: c["partitions"]["mnist5k_dir0.5"].update(dataset="imagenet"), "dataset"),
    (lambda c: c["experiments"]["tiny"].update(algorithms=["fedavg_active", "nope"]), "nope"),
    (lambda c: c["algorithms"]["fedavg_active"].update(weighting="sometimes"), "weighting"),
    (lambda c: c["experiments"]["tiny"]["training"].update(rounds=50), "rounds"),
    (lambda c: c["experiments"].update({"tiny_{x}": {**c["experiments"]["tiny"], "grid": {"a": [1]}}}),
     "experiments.tiny_{x}: the name uses {x}, which is not an axis"),
])
def test_invalid_config_is_rejected_naming_the_key(tmp_path, edit, key):
    workdir = copy_workflow(tmp_path / "wf")
    bad = _config_with(tmp_path, edit)
    result = snakemake(workdir, "-n", "--configfile", str(bad), check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert key in output
    assert not (workdir / "data").exists() and not (workdir / "results").exists()
