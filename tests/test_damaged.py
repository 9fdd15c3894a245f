"""Damaged, deleted, edited or foreign files on a finished run of config/test.yaml: a dry run only names them; the
next real run sets them aside and rebuilds them, never costing the finished results (before, a truncated trace made
Snakemake delete the runs' outputs and then fail, and a dry run moved files that nothing then rebuilt). A finished
project moved elsewhere reruns nothing."""

import json
import shutil

from tiny_run import assert_same_results, copy_finished_run, finished_run, planned_jobs, private_src, run_env, snakemake


def _truncate(path, size):
    with open(path, "r+b") as f:
        f.truncate(size)


def test_a_dry_run_moves_nothing_and_the_next_run_rebuilds_what_is_damaged(tmp_path):
    run = copy_finished_run(tmp_path / "run")
    trace = run / "data/traces/stationary/seed0.npz"
    _truncate(trace, 500)
    summary = run / "results/runs/tiny/fedavg_known/seed1/summary.json"
    _truncate(summary, 20)
    copied = run / "results/runs/tiny/fedavg_active/seed1/summary.json"  # seed 0's summary in seed 1's folder
    copied.write_bytes((run / "results/runs/tiny/fedavg_active/seed0/summary.json").read_bytes())
    emptied = run / "results/runs/tiny/fedavg_known/seed0/summary.json"
    emptied.write_text("{}")
    frame = run / "results/frames/test.parquet"
    _truncate(frame, frame.stat().st_size // 2)
    damaged = (trace, summary, copied, emptied, frame)
    before = {path: path.read_bytes() for path in damaged}

    dry = snakemake(run, "--dry-run", "--configfile", "config/test.yaml")
    assert {path: path.read_bytes() for path in damaged} == before
    assert not list(run.rglob("*.damaged"))
    for path in damaged:
        assert f"{path.relative_to(run)} is damaged" in dry.stderr and "a run (not a dry run) sets it aside" in dry.stderr

    snakemake(run, "--cores", "2", "--configfile", "config/test.yaml")
    assert all(path.with_name(path.name + ".damaged").exists() for path in damaged)
    assert trace.read_bytes() == (finished_run() / "data/traces/stationary/seed0.npz").read_bytes()
    assert json.loads(copied.read_text())["seed"] == 1 and json.loads(emptied.read_text())["seed"] == 0
    assert_same_results(run, finished_run())
    assert planned_jobs(run, "--configfile", "config/test.yaml") == set()


def test_a_zero_byte_or_deleted_partition_is_rebuilt(tmp_path):
    run = copy_finished_run(tmp_path / "run")
    emptied = run / "data/partitions/mnist5k_dir0.5/seed1.npz"
    emptied.write_bytes(b"")
    deleted = run / "data/partitions/mnist5k_dir0.5/seed0.npz"
    deleted.unlink()
    snakemake(run, "--cores", "2", "--configfile", "config/test.yaml")
    for partition in (emptied, deleted):
        assert partition.read_bytes() == (finished_run() / partition.relative_to(run)).read_bytes()
    assert_same_results(run, finished_run())
    shutil.rmtree(run)


def test_a_finished_project_moved_with_its_code_reruns_nothing(tmp_path):
    """The project and the fedavail sources it ran with, both copied to another place: nothing to do."""
    moved = tmp_path / "elsewhere"
    run = copy_finished_run(moved / "project")
    shutil.copytree(private_src(), moved / "src")
    env = run_env({"PYTHONPATH": str(moved / "src")})
    assert planned_jobs(run, "--configfile", "config/test.yaml", env=env) == set()
