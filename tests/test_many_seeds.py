"""Many seeds in one process (fedavail.train.run_together): every seed's metrics and summary equal its separate run's,
on the per-client loop and on the vmap back end, and resume works per seed."""

import json

import pandas as pd
import pytest
import torch
from synthetic import image_dataset

from fedavail.availability.traces import make_trace, save_trace
from fedavail.cli import main
from fedavail.data.prepared import save_prepared
from fedavail.partitions.partition import make_partition, save_partition
from fedavail.train import Execution, RunInputs, run_together

SEEDS = (0, 1, 2)
TRAINING = {"model": "small_cnn", "rounds": 6, "eval_every": 2, "last_n": 1, "train_eval_samples": 100,
            "augmentation": {}, "local": {"steps": 3, "batch_size": 16, "schedule": "sqrt_decay", "grad_clip": 0.5}}
ALGORITHMS = {
    "fedavg": {"algorithm": "fedavg", "lr": 0.05, "weighting": "known"},
    "fedswe": {"algorithm": "fedswe", "k": 10, "echo_clip": 0.5, "lr": 0.05},
    "mifa": {"algorithm": "mifa", "lr": 0.05},
}
LOOP = Execution(batched=False)
# Summary fields that depend on the process, not on what the run computed.
PROCESS_FIELDS = ("wall_seconds", "peak_memory_bytes", "provenance", "digest")  # the digest covers the others


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """One prepared dataset; each seed its own partition and trace, as the workflow makes them."""
    root = tmp_path_factory.mktemp("inputs")
    dataset = image_dataset()
    save_prepared(root / "data.pt", dataset)
    for seed in SEEDS:
        partition = make_partition(dataset["train_y"].numpy(), 10,
                                   {"scheme": "client_dirichlet", "num_clients": 8, "alpha": 0.5}, seed=seed)
        save_partition(root / f"partition{seed}.npz", partition)
        trace = make_trace({"model": "fedswe", "dynamics": "sine"}, 8, 20, seed=seed, partition=partition)
        save_trace(root / f"trace{seed}.npz", trace)
    return root


def _spec(algorithm, seed):
    return {"experiment": "unit", "algorithm_id": algorithm, "seed": seed, "training": TRAINING,
            "algorithm": ALGORITHMS[algorithm]}


def _run_inputs(inputs, out, algorithm, seeds):
    return [RunInputs(inputs / f"partition{s}.npz", inputs / f"trace{s}.npz", out / f"seed{s}", _spec(algorithm, s))
            for s in seeds]


def _outputs(directory):
    metrics = pd.read_parquet(directory / "metrics.parquet").drop(columns="seconds")
    summary = json.loads((directory / "summary.json").read_text())
    return metrics, {k: v for k, v in summary.items() if k not in PROCESS_FIELDS}


def _assert_same_run(directory, reference, exact):
    (metrics, summary), (expected_metrics, expected_summary) = _outputs(directory), _outputs(reference)
    if exact:
        pd.testing.assert_frame_equal(metrics, expected_metrics, check_exact=True)
    else:  # vmap over more rows may reassociate batched kernels' sums: float64 keeps that far below 1e-12
        pd.testing.assert_frame_equal(metrics, expected_metrics, check_exact=False, rtol=0, atol=1e-12)
    assert summary == expected_summary


@pytest.mark.parametrize("batched", [False, True], ids=["loop", "vmap"])
@pytest.mark.parametrize("algorithm", ["fedavg", "fedswe", "mifa"])
def test_each_seed_of_a_many_seed_run_equals_its_separate_run(inputs, tmp_path, algorithm, batched):
    execution = Execution(batched=batched)
    results = run_together(inputs / "data.pt", _run_inputs(inputs, tmp_path / "together", algorithm, SEEDS),
                           execution, dtype=torch.float64)
    assert [r["seed"] for r in results] == list(SEEDS)
    for seed in SEEDS:
        run_together(inputs / "data.pt", _run_inputs(inputs, tmp_path / "alone", algorithm, [seed]), execution,
                     dtype=torch.float64)
        _assert_same_run(tmp_path / f"together/seed{seed}", tmp_path / f"alone/seed{seed}", exact=not batched)
    first, second = (pd.read_parquet(tmp_path / f"together/seed{s}/metrics.parquet") for s in SEEDS[:2])
    assert not first["test_acc"].dropna().equals(second["test_acc"].dropna())


@pytest.mark.parametrize("batched", [False, True], ids=["loop", "vmap"])
def test_runs_of_other_experiments_with_the_same_settings_train_together_as_they_would_alone(inputs, tmp_path,
                                                                                            batched):
    """A batch job of execution.seeds_per_job: all: the same seed in two experiments (other partition and trace)
    and under two algorithm entries of equal settings, each run's numbers its separate run's."""
    runs = []
    for experiment, partition_seed in (("first", 0), ("second", 1)):
        for algorithm_id in ("fedswe", "fedswe_again"):
            spec = {**_spec("fedswe", 0), "experiment": experiment, "algorithm_id": algorithm_id}
            runs.append(RunInputs(inputs / f"partition{partition_seed}.npz", inputs / f"trace{partition_seed}.npz",
                                  tmp_path / f"together/{experiment}/{algorithm_id}", spec))
    execution = Execution(batched=batched)
    run_together(inputs / "data.pt", runs, execution, dtype=torch.float64)
    for run in runs:
        out_dir = tmp_path / "alone" / run.out_dir.relative_to(tmp_path / "together")
        alone = RunInputs(run.partition, run.trace, out_dir, run.spec)
        run_together(inputs / "data.pt", [alone], execution, dtype=torch.float64)
        _assert_same_run(run.out_dir, alone.out_dir, exact=not batched)
    with pytest.raises(ValueError, match="must differ: .*'first/fedswe seed 0', 'first/fedswe seed 0'"):
        run_together(inputs / "data.pt", [runs[0], runs[0]], execution)


@pytest.mark.parametrize("batched", [False, True], ids=["loop", "vmap"])
def test_adding_a_seed_rewrites_the_finished_seeds_files_as_they_were(inputs, tmp_path, batched):
    """What the multi-seed Snakemake job does when a seed is added: Snakemake deletes all its outputs and reruns it;
    the seeds finished before are restored from their finished.json (not recomputed, so even vmap in float32, whose
    sums depend on how many rows are batched, gives the same numbers), the new seed is trained."""
    execution = Execution(batched=batched)
    run_together(inputs / "data.pt", _run_inputs(inputs, tmp_path / "runs", "fedswe", SEEDS[:2]), execution)
    before = {s: {name: (tmp_path / f"runs/seed{s}/{name}").read_bytes() for name in ("metrics.parquet", "summary.json")}
              for s in SEEDS[:2]}
    for seed in SEEDS[:2]:
        for name in before[seed]:
            (tmp_path / f"runs/seed{seed}/{name}").unlink()
    results = run_together(inputs / "data.pt", _run_inputs(inputs, tmp_path / "runs", "fedswe", SEEDS), execution)
    for seed in SEEDS[:2]:
        for name, content in before[seed].items():
            assert (tmp_path / f"runs/seed{seed}/{name}").read_bytes() == content
    assert results[2]["seed"] == 2 and (tmp_path / "runs/seed2/metrics.parquet").exists()


def test_a_finished_json_of_other_settings_is_not_restored(inputs, tmp_path):
    # On the loop, so that a seed trained with others equals its separate run exactly (vmap over more rows may
    # reassociate float32 sums).
    run_together(inputs / "data.pt", _run_inputs(inputs, tmp_path / "runs", "fedavg", SEEDS[:2]), LOOP)
    assert (tmp_path / "runs/seed0/finished.json").exists()
    changed = _run_inputs(inputs, tmp_path / "runs", "fedavg", SEEDS[:2])
    for seed in changed:
        seed.spec = {**seed.spec, "algorithm": {**ALGORITHMS["fedavg"], "lr": 0.02}}
    run_together(inputs / "data.pt", changed, LOOP)
    alone = _run_inputs(inputs, tmp_path / "alone", "fedavg", [0])
    alone[0].spec = changed[0].spec
    run_together(inputs / "data.pt", alone, LOOP)
    _assert_same_run(tmp_path / "runs/seed0", tmp_path / "alone/seed0", exact=True)


def test_a_preempted_many_seed_run_resumes_every_seed_and_a_new_seed_catches_up(inputs, tmp_path):
    # The loop: exact across seed counts (vmap in float32 sums differently over 2 and 3 seeds' rows).
    whole = run_together(inputs / "data.pt", _run_inputs(inputs, tmp_path / "whole", "mifa", SEEDS), LOOP)
    stopped = run_together(inputs / "data.pt", _run_inputs(inputs, tmp_path / "split", "mifa", SEEDS[:2]),
                           Execution(batched=False, checkpoint_every=100), stop_after_round=3)
    assert stopped == [{"stopped_at": 3}, {"stopped_at": 3}]
    assert all((tmp_path / f"split/seed{s}/checkpoint.pt").exists() for s in SEEDS[:2])
    # Resumed with a third seed: seeds 0 and 1 continue at round 3, seed 2 starts at round 0.
    resumed = run_together(inputs / "data.pt", _run_inputs(inputs, tmp_path / "split", "mifa", SEEDS), LOOP)
    assert [r["rounds_completed"] for r in resumed] == [r["rounds_completed"] for r in whole]
    for seed in SEEDS:
        _assert_same_run(tmp_path / f"split/seed{seed}", tmp_path / f"whole/seed{seed}", exact=True)
        assert not (tmp_path / f"split/seed{seed}/checkpoint.pt").exists()


def test_seeds_trained_together_must_share_their_settings(inputs, tmp_path):
    seeds = _run_inputs(inputs, tmp_path, "fedavg", SEEDS[:2])
    seeds[1].spec = {**seeds[1].spec, "algorithm": ALGORITHMS["mifa"]}
    with pytest.raises(ValueError, match="must share every setting but experiment, algorithm_id, seed"):
        run_together(inputs / "data.pt", seeds)


def test_train_seeds_needs_one_partition_trace_and_folder_per_spec(inputs, tmp_path):
    specs = json.dumps([_spec("fedavg", s) for s in SEEDS[:2]])
    with pytest.raises(SystemExit, match="one entry per spec \\(2\\); got 2, 1 and 2"):
        main(["train-seeds", "--prepared", str(inputs / "data.pt"),
              "--partition", str(inputs / "partition0.npz"), str(inputs / "partition1.npz"),
              "--trace", str(inputs / "trace0.npz"), "--out-dir", str(tmp_path / "a"), str(tmp_path / "b"),
              "--spec", specs])
