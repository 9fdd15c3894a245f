"""Incremental reruns on config/test.yaml: after a full run, each change reruns exactly the jobs it affects, read from
the job list of a dry run (never from timings)."""

import os
import re

import pytest
import yaml
from tiny_run import copy_finished_run, planned_jobs, private_src, snakemake
from workflow_helpers import REPO

from fedavail.plan.load import load_config

SEEDS = (0, 1)
ALGORITHMS = ("fedavg_active", "fedavg_known")
REPORT = {"report_experiment[experiment=tiny]", "all"}


def is_report(job: str) -> bool:
    return job == "all" or job.startswith("report")


def train(algorithm, seed):
    return f"train[experiment=tiny,algorithm={algorithm},seed={seed}]"


def trace(seed):
    return f"trace[trace=stationary,seed={seed}]"


def partition(seed):
    return f"partition[partition=mnist5k_dir0.5,seed={seed}]"


@pytest.fixture
def run(tmp_path):
    return copy_finished_run(tmp_path / "run")


def edit_config(workdir, edit):
    path = workdir / "config/test.yaml"
    config = load_config([path])
    edit(config)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def plan(workdir):
    return planned_jobs(workdir, "--configfile", "config/test.yaml")


def assert_reruns(workdir, expected):
    """Exactly `expected` outside the reports; of the reports, at least the experiment's table (a config may define
    more reports over the same runs, and those rerun too)."""
    planned = plan(workdir)
    assert {job for job in planned if not is_report(job)} == {job for job in expected if not is_report(job)}
    assert REPORT <= planned, planned


def test_full_run_leaves_nothing_to_do(run):
    assert plan(run) == set()


def test_learning_rate_reruns_that_algorithm_and_the_reports(run):
    edit_config(run, lambda c: c["algorithms"]["fedavg_active"].update(lr=0.05))
    assert_reruns(run, {train("fedavg_active", s) for s in SEEDS})


def test_a_dry_run_shows_a_changed_spec_as_two_digests(run):
    """The reason a job reruns names the sha256 of its spec before and now, not the whole JSON of both."""
    edit_config(run, lambda c: c["algorithms"]["fedavg_active"].update(lr=0.05))
    output = snakemake(run, "--dry-run", "--configfile", "config/test.yaml").stdout
    reasons = [line for line in output.splitlines() if "Params have changed" in line]
    assert len(reasons) == len(SEEDS), output
    for line in reasons:
        assert re.search(r"before: '[0-9a-f]{64}' now: '[0-9a-f]{64}' *$", line) and "{" not in line, line


def test_new_seed_runs_only_its_jobs_and_the_reports(run):
    edit_config(run, lambda c: c.update(seeds=[0, 1, 2]))
    assert_reruns(run, {partition(2), trace(2), *(train(a, 2) for a in ALGORITHMS)})


def test_trace_parameter_reruns_the_trace_and_its_runs_not_the_partitions(run):
    edit_config(run, lambda c: c["traces"]["stationary"].update(rounds=16))
    assert_reruns(run, {trace(s) for s in SEEDS} | {train(a, s) for a in ALGORITHMS for s in SEEDS})


def test_execution_settings_rerun_nothing(run):
    edit_config(run, lambda c: c["execution"].update(log_every=3, checkpoint_every=2, train_threads=2,
                                                    seconds_per_round=30))
    assert plan(run) == set()


def test_editing_training_code_reruns_training(run):
    # The runs import fedavail from a private copy of src/ (see tiny_run), so this edits real training code without
    # touching the working tree; the file is restored afterwards for the other tests of the session.
    source = private_src() / "fedavail/engine/local.py"
    original, stat = source.read_bytes(), source.stat()
    try:
        source.write_bytes(original + b"\n# an edit\n")
        assert_reruns(run, {train(a, s) for a in ALGORITHMS for s in SEEDS})
    finally:
        source.write_bytes(original)
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert plan(run) == set()


def test_a_new_algorithm_or_an_edit_to_one_these_runs_do_not_use_reruns_nothing(run):
    """Every run of config/test.yaml is FedAvg's: a new algorithm (its two modules) and edits to FedSWE and FedProx
    leave them alone; an edit to FedAvg reruns them all (fedavail.plan.sources)."""
    src = private_src() / "fedavail"
    added = {src / "plan/algorithms/fedavg_copy.py": (src / "plan/algorithms/fedavg.py").read_text(),
             src / "algorithms/fedavg_copy.py": (src / "algorithms/fedavg.py").read_text().replace(
                 "fedavail.plan.algorithms.fedavg ", "fedavail.plan.algorithms.fedavg_copy ")}
    others = [src / f"{room}/{name}.py" for room in ("algorithms", "plan/algorithms") for name in ("fedswe", "fedprox")]
    edited = [*others, src / "algorithms/fedavg.py"]
    originals = {path: (path.read_bytes(), path.stat()) for path in edited}
    try:
        for path, text in added.items():
            path.write_text(text)
        for path in others:
            path.write_bytes(originals[path][0] + b"\n# an edit\n")
        assert plan(run) == set()
        edited[-1].write_bytes(originals[edited[-1]][0] + b"\n# an edit\n")
        assert_reruns(run, {train(a, s) for a in ALGORITHMS for s in SEEDS})
    finally:
        for path in added:
            path.unlink(missing_ok=True)
        for path, (original, stat) in originals.items():
            path.write_bytes(original)
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert plan(run) == set()


def test_editing_a_readme_reruns_nothing(run):
    (run / "README.md").write_text((REPO / "README.md").read_text() + "\nAn edit after the run.\n")
    (run / "config" / "README.md").write_text("Notes on the configs.\n")
    assert plan(run) == set()
