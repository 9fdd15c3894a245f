"""benchmarks/job_accounting.py: a run's job time inside and outside training loops, from its Snakemake log and the
lines every fedavail command writes to its job log."""

import json
import re
import subprocess
import sys

from test_train import SPEC

from synthetic import training_inputs
from workflow_helpers import REPO

SCRIPT = REPO / "benchmarks" / "job_accounting.py"


def snakemake_log(jobs: list[tuple[str, str | None]], done: int | None = None) -> str:
    """A local run's log as Snakemake 9 writes it to .snakemake/log/, of `jobs` (rule, job log), `done` of them
    finished."""
    total, done = len(jobs), len(jobs) if done is None else done
    lines = ["Assuming unrestricted shared filesystem usage.", "", "Building DAG of jobs...", "Provided cores: 2",
             "Job stats:", "job      count", "-----  -------", f"total  {total}", ""]
    for jobid, (rule, log) in enumerate(jobs[:done], 1):
        lines += ["Select jobs to execute...", "Execute 1 jobs...", "[Tue Dec  1 22:03:59 2026]", f"localrule {rule}:",
                  "    input: data/in", "    output: data/out", *([f"    log: {log}"] if log else []),
                  f"    jobid: {jobid}", "    reason: Missing output files: data/out", "    resources: tmpdir=/tmp",
                  "[Tue Dec  1 22:04:07 2026]", f"Finished jobid: {jobid} (Rule: {rule})",
                  f"{jobid} of {total} steps ({jobid / total:.0%}) done"]
    if done == total:
        lines += ["Complete log(s): /run/.snakemake/log/2026-12-01T220358.911038.snakemake.log",
                  "Elapsed time: 0:01:25.472132"]
    return "\n".join(lines) + "\n"


def job_log(stage: str, started: float, finished: float, loops: tuple[float, ...] = ()) -> str:
    """A job log with the lines fedavail.cli and fedavail.train write."""
    lines = [f"2026-12-01 22:16:31,532 INFO fedavail.cli: {stage} started {started:.2f} s after its process started",
             "2026-12-01 22:16:31,533 INFO fedavail.train: device=cpu threads=1 batched=False"]
    lines += [f"2026-12-01 22:16:40,000 INFO fedavail.train: round loop: {seconds:.2f} s" for seconds in loops]
    lines.append(f"2026-12-01 22:16:41,000 INFO fedavail.cli: {stage} finished {finished:.2f} s after its process "
                 "started")
    return "\n".join(lines) + "\n"


def write_run(root, jobs: dict[str, tuple[str, str]], done: int | None = None,
              name: str = "2026-12-01T220358.911038") -> None:
    """A run folder: the Snakemake log of `jobs` ({job log: (rule, its content)}) plus rule all, and the job logs."""
    (root / ".snakemake/log").mkdir(parents=True, exist_ok=True)
    entries = [(rule, log) for log, (rule, _) in jobs.items()] + [("all", None)]
    (root / f".snakemake/log/{name}.snakemake.log").write_text(snakemake_log(entries, done))
    for log, (_, text) in jobs.items():
        (root / log).parent.mkdir(parents=True, exist_ok=True)
        (root / log).write_text(text)


def accounting(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def table_rows(output: str) -> dict[str, list[str]]:
    return {cells[0]: cells[1:] for line in output.splitlines() if line.startswith("| ") and "---" not in line
            for cells in [[c.strip() for c in line.strip("|").split("|")]]}


def test_the_accounting_adds_up_a_synthetic_run(tmp_path):
    write_run(tmp_path, {
        "logs/partition/p/seed0.log": ("partition", job_log("partition", 0.05, 0.80)),
        "logs/partition/p/seed1.log": ("partition", job_log("partition", 0.06, 0.90)),
        "logs/trace/t/seed0.log": ("trace", job_log("trace", 0.05, 0.60)),
        "logs/train/e/a/seed0.log": ("train", job_log("train", 0.05, 20.00, (17.50,))),
        "logs/train/e/b/train_seeds_0_1.log": ("train_seeds_0_1", job_log("train-seeds", 0.05, 21.00, (18.00,))),
    })
    (tmp_path / ".snakemake/log/2026-12-01T233426.994482.snakemake.log").write_text(
        "Congratulations, your workflow is in a good condition!\n")  # a later lint run: not the run
    result = accounting(tmp_path)
    assert result.returncode == 0, result.stderr
    rows = table_rows(result.stdout)
    # rule: jobs, job time, per job, before main(), in round loops, outside them, their share of all job time
    assert rows["partition"] == ["2", "1.70", "0.85", "0.11", "0.00", "1.70", "3.9%"]
    assert rows["train"] == ["1", "20.00", "20.00", "0.05", "17.50", "2.50", "5.8%"]
    assert rows["train_seeds_0_1"][4:] == ["18.00", "3.00", "6.9%"]
    assert rows["**all jobs**"] == ["5", "43.30", "8.66", "0.26", "35.50", "7.80", "18.0%"]
    assert list(rows)[1:4] == ["train_seeds_0_1", "train", "partition"]  # by time outside loops
    assert "5 timed, 1 without a log (all) not timed" in result.stdout
    assert "Outside training loops: 7.8 s of 43.3 s of job time (18.0%)." in result.stdout


def test_an_incomplete_run_or_an_untimed_job_is_refused(tmp_path):
    jobs = {"logs/trace/t/seed0.log": ("trace", job_log("trace", 0.05, 0.60)),
            "logs/trace/t/seed1.log": ("trace", job_log("trace", 0.05, 0.70))}
    write_run(tmp_path / "incomplete", jobs, done=1)
    result = accounting(tmp_path / "incomplete")
    assert result.returncode != 0 and "is incomplete (1 of 3 steps done): finish it first" in result.stderr

    jobs["logs/trace/t/seed1.log"] = ("trace", "".join(job_log("trace", 0.05, 0.70).splitlines(True)[:-1]))
    write_run(tmp_path / "failed", jobs)
    (tmp_path / "failed/logs/trace/t/seed0.log").unlink()
    result = accounting(tmp_path / "failed")
    assert result.returncode != 0 and "2 of 2 jobs cannot be timed" in result.stderr
    assert "seed0.log is missing" in result.stderr and "seed1.log has no line 'finished" in result.stderr

    assert "no Snakemake log of a run that ran jobs" in accounting(tmp_path / "nothing").stderr


def test_several_invocations_count_a_job_once_with_its_last_log(tmp_path):
    write_run(tmp_path, {"logs/trace/t/seed0.log": ("trace", job_log("trace", 0.05, 0.60))},
              name="2026-12-01T100000.000000")
    write_run(tmp_path, {"logs/trace/t/seed0.log": ("trace", job_log("trace", 0.05, 0.50)),
                         "logs/trace/t/seed1.log": ("trace", job_log("trace", 0.05, 0.70))},
              name="2026-12-01T110000.000000")
    logs = sorted((tmp_path / ".snakemake/log").glob("*.log"))
    result = accounting(tmp_path, "--snakemake-log", logs[0], "--snakemake-log", logs[1])
    assert result.returncode == 0, result.stderr
    assert table_rows(result.stdout)["trace"][:2] == ["2", "1.20"]


def test_the_accounting_reads_what_the_commands_write(tmp_path):
    """Real `fedavail trace` and `fedavail train` processes, their stderr in their job logs as the rules redirect it."""
    training_inputs(tmp_path)
    spec = {**SPEC, "training": {**SPEC["training"], "rounds": 2, "last_n": 1}}
    commands = {
        "logs/trace/t/seed0.log": ("trace", ["trace", "--seed", "0", "--spec", json.dumps(
            {"model": "bernoulli", "p": 0.5, "num_clients": 10, "rounds": 5}), "--out", "t.npz", "--figure", "t.png"]),
        "logs/train/e/a/seed0.log": ("train", ["train", "--prepared", "data.pt", "--partition", "partition.npz",
                                               "--trace", "trace.npz", "--out-dir", "run", "--spec", json.dumps(spec),
                                               "--threads", "1"]),
    }
    for log, (_, argv) in commands.items():
        (tmp_path / log).parent.mkdir(parents=True)
        with open(tmp_path / log, "w") as stderr:
            subprocess.run([sys.executable, "-m", "fedavail", *argv], cwd=tmp_path, stderr=stderr, check=True)
    write_run(tmp_path, {log: (rule, (tmp_path / log).read_text()) for log, (rule, _) in commands.items()})
    result = accounting(tmp_path)
    assert result.returncode == 0, result.stderr
    rows = table_rows(result.stdout)
    for rule in ("trace", "train"):
        jobs, seconds, _, before_main, in_loops, outside, _ = map(lambda cell: float(cell.rstrip("%")), rows[rule])
        assert jobs == 1 and 0 <= before_main < seconds and outside > 0
        assert (in_loops > 0) == (rule == "train")
    assert re.search(r"Outside training loops: [0-9.]+ s of [0-9.]+ s of job time \([0-9.]+%\)\.", result.stdout)
