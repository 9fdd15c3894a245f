"""Damaged intermediates on a finished run of config/test.yaml: set aside and rebuilt by the next run, never costing
the finished results (before, a truncated trace made Snakemake delete the runs' outputs and then fail)."""

import shutil

from tiny_run import assert_same_results, copy_finished_run, finished_run, snakemake


def test_damaged_trace_and_summary_are_rebuilt_and_results_survive(tmp_path):
    run = copy_finished_run(tmp_path / "run")
    trace = run / "data/traces/stationary/seed0.npz"
    with open(trace, "r+b") as f:
        f.truncate(500)
    summary = run / "results/runs/tiny/fedavg_known/seed1/summary.json"
    with open(summary, "r+b") as f:
        f.truncate(20)
    snakemake(run, "--cores", "2", "--configfile", "config/test.yaml")
    assert (trace.parent / "seed0.npz.damaged").exists() and (summary.parent / "summary.json.damaged").exists()
    assert trace.read_bytes() == (finished_run() / "data/traces/stationary/seed0.npz").read_bytes()
    assert_same_results(run, finished_run())


def test_a_zero_byte_partition_is_rebuilt(tmp_path):
    run = copy_finished_run(tmp_path / "run")
    partition = run / "data/partitions/mnist5k_dir0.5/seed1.npz"
    partition.write_bytes(b"")
    snakemake(run, "--cores", "2", "--configfile", "config/test.yaml")
    assert partition.read_bytes() == (finished_run() / "data/partitions/mnist5k_dir0.5/seed1.npz").read_bytes()
    assert_same_results(run, finished_run())
    shutil.rmtree(run)
