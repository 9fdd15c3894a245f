"""execution.seeds_per_job: all on config/test.yaml: one Snakemake job per batch of runs with the same settings
(here each algorithm's seeds; with another experiment of the same settings, its runs too) writes the same per-seed
files as the default per-run jobs, adding a seed reruns those jobs without changing finished seeds, and switching
back to one job per run retrains nothing."""

import shutil

import pandas as pd
import pytest
import yaml

from tiny_run import assert_same_results, copy_workflow_files, finished_run, planned_jobs, run_env, snakemake

ALGORITHMS = ("fedavg_active", "fedavg_known")


def _edit_config(workdir, edit):
    path = workdir / "config/test.yaml"
    config = yaml.safe_load(path.read_text())
    edit(config)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


@pytest.fixture(scope="module")
def seeds_run(tmp_path_factory):
    workdir = copy_workflow_files(tmp_path_factory.mktemp("seeds") / "run")
    _edit_config(workdir, lambda c: c.setdefault("execution", {}).update(seeds_per_job="all"))
    snakemake(workdir, "--cores", "2", "--configfile", "config/test.yaml")
    return workdir


def test_one_job_per_algorithm_writes_what_the_per_run_jobs_write(seeds_run):
    # A batch vmaps both seeds' clients in one call, a per-run job one seed's: float32 sums may differ in order.
    assert_same_results(seeds_run, finished_run(), rtol=1e-3)
    assert planned_jobs(seeds_run, "--configfile", "config/test.yaml") == set()


def test_switching_to_one_job_per_run_restores_every_run_from_its_finished_json(seeds_run, tmp_path):
    """Snakemake reruns the jobs (a job of all seeds reads every seed's partition and trace, so its inputs are not
    a one-seed job's), and each restores its finished seed from its finished.json instead of training it again."""
    workdir = tmp_path / "switched"
    shutil.copytree(seeds_run, workdir, symlinks=True)
    _edit_config(workdir, lambda c: c["execution"].update(seeds_per_job=1))
    snakemake(workdir, "--cores", "2", "--configfile", "config/test.yaml")
    for algorithm in ALGORITHMS:
        for seed in (0, 1):
            log = (workdir / f"logs/train/tiny/{algorithm}/seed{seed}.log").read_text()
            assert "outputs rewritten from" in log and "start: fresh" not in log, log
    assert_same_results(workdir, seeds_run)
    assert planned_jobs(workdir, "--configfile", "config/test.yaml") == set()


def test_a_new_seed_reruns_the_multi_seed_jobs_and_keeps_the_finished_seeds_files(seeds_run):
    runs = seeds_run / "results/runs/tiny"
    before = {path: path.read_bytes() for path in sorted(runs.rglob("*")) if path.name in ("metrics.parquet",
                                                                                          "summary.json")}
    _edit_config(seeds_run, lambda c: c.update(seeds=[0, 1, 2]))
    planned = {job for job in planned_jobs(seeds_run, "--configfile", "config/test.yaml")
               if job != "all" and not job.startswith("report")}
    assert planned == {"partition[partition=mnist5k_dir0.5,seed=2]", "trace[trace=stationary,seed=2]",
                       *(f"train_{a}" for a in ALGORITHMS)}
    snakemake(seeds_run, "--cores", "2", "--configfile", "config/test.yaml")
    assert len(before) == 2 * len(ALGORITHMS) * 2
    for path, content in before.items():
        assert path.read_bytes() == content, path
    assert all((runs / a / "seed2/metrics.parquet").exists() for a in ALGORITHMS)


def test_the_local_gpu_profile_trains_all_seeds_in_one_job_and_the_default_one_seed_per_job(tmp_path):
    workdir = copy_workflow_files(tmp_path / "run")
    default = planned_jobs(workdir, "--configfile", "config/test.yaml")
    gpu = planned_jobs(workdir, "--workflow-profile", "profiles/local-gpu", "--configfile", "config/test.yaml",
                       env=run_env({"FEDAVAIL_GPUS": "1"}))
    assert {job for job in default if job.startswith("train")} == {
        f"train[experiment=tiny,algorithm={a},seed={s}]" for a in ALGORITHMS for s in (0, 1)}
    assert {job for job in gpu if job.startswith("train")} == {
        f"train_{a}" for a in ALGORITHMS}


def test_an_experiment_with_the_same_settings_joins_the_batch_and_the_finished_runs_are_restored(seeds_run, tmp_path):
    workdir = tmp_path / "joined"
    shutil.copytree(seeds_run, workdir, symlinks=True)
    runs = workdir / "results/runs/tiny"
    before = {path: path.read_bytes() for path in sorted(runs.rglob("*")) if path.name in ("metrics.parquet",
                                                                                          "summary.json")}
    _edit_config(workdir, lambda c: c["experiments"].update(
        tiny_again={**c["experiments"]["tiny"], "algorithms": ["fedavg_active"], "seeds": [1]}))
    planned = {job for job in planned_jobs(workdir, "--configfile", "config/test.yaml")
               if job != "all" and not job.startswith("report")}
    assert planned == {"train_fedavg_active"}
    snakemake(workdir, "--cores", "2", "--configfile", "config/test.yaml")
    log = (workdir / "logs/train/train_fedavg_active.log").read_text()
    seeds = yaml.safe_load((workdir / "config/test.yaml").read_text())["seeds"]  # an earlier test may add one
    assert log.count("outputs rewritten from") == len(seeds) and log.count("start: fresh") == 1, log
    assert before and all(path.read_bytes() == content for path, content in before.items())
    # The same run under another experiment's name: the same numbers (vmap over fewer rows may reassociate sums).
    joined, alone = (pd.read_parquet(workdir / f"results/runs/{e}/fedavg_active/seed1/metrics.parquet")
                     for e in ("tiny_again", "tiny"))
    pd.testing.assert_frame_equal(joined.drop(columns="seconds"), alone.drop(columns="seconds"), rtol=1e-5)
