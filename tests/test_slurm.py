"""profiles/slurm: what it asks SLURM for, and config/test.yaml run through it on a real single-node SLURM
(scripts/slurm_cluster.py): the jobs run under SLURM (sacct says so, in the partition and account taken from the
user's environment) and the results equal a local run's.

The real-cluster test is opt-in: FEDAVAIL_SLURM_TESTS=1 (needs root and `apt-get install slurm-wlm munge slurmdbd
mariadb-server`; .ci/run does both). Its node has no GPU, so that run overrides the training jobs' gpu resource with
--set-resources train:gpu=0.
"""

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from fedavail.plan.load import load_config
from tiny_run import assert_same_results, copy_finished_run, copy_workflow_files, finished_run, run_env, snakemake
from workflow_helpers import REPO

ENABLED = os.environ.get("FEDAVAIL_SLURM_TESTS") == "1"
real_cluster = pytest.mark.skipif(
    not ENABLED, reason="SLURM cluster tests are opt-in: FEDAVAIL_SLURM_TESTS=1 (needs root and apt-get install "
                        "slurm-wlm munge slurmdbd mariadb-server; .ci/run does it)")

SCRIPT = REPO / "scripts" / "slurm_cluster.py"
PARTITION, ACCOUNT = "fedavail", "fedavail-test"  # the cluster script's non-default partition and its account
# What the user's command line adds on this cluster: no GPUs and only this machine's CPUs on the node; status
# checks from the first second.
GPU_LESS = ("--set-resources", "train:gpu=0")
SMALL_NODE = ("--cores", str(os.cpu_count()))
FAST_STATUS = ("--slurm-init-seconds-before-status-checks", "1")


def _profile(name: str) -> dict:
    from snakemake.profiles import ProfileConfigFileParser

    with open(REPO / "profiles" / name / "config.yaml") as stream:
        return ProfileConfigFileParser().parse(stream)


def test_profile_takes_partition_and_account_from_the_environment(monkeypatch):
    for name in ("FEDAVAIL_SLURM_PARTITION", "FEDAVAIL_SLURM_GPU_PARTITION", "FEDAVAIL_SLURM_ACCOUNT"):
        monkeypatch.delenv(name, raising=False)
    profile = _profile("slurm")
    assert not any(r.startswith(("slurm_partition", "slurm_account")) for r in profile["default-resources"])
    assert "set-resources" not in profile
    monkeypatch.setenv("FEDAVAIL_SLURM_PARTITION", "cpu-short")
    monkeypatch.setenv("FEDAVAIL_SLURM_GPU_PARTITION", "gpu-a100")
    monkeypatch.setenv("FEDAVAIL_SLURM_ACCOUNT", "proj-42")
    profile = _profile("slurm")
    assert "slurm_partition='cpu-short'" in profile["default-resources"]
    assert "slurm_account='proj-42'" in profile["default-resources"]
    assert profile["set-resources"] == ["train:slurm_partition='gpu-a100'"]


def _train_resources(workdir: Path, *args: str) -> dict:
    """The resources Snakemake gives the first training job under profiles/slurm (from a forced dry run)."""
    result = snakemake(workdir, "--workflow-profile", "profiles/slurm", "--configfile", "config/test.yaml",
                       "--dry-run", "--forcerun", "train", *args)
    blocks = result.stdout.split("\nrule ")
    block = next(b for b in blocks if b.startswith("train:"))
    line = next(line for line in block.splitlines() if line.strip().startswith("resources:"))
    values = dict(item.strip().split("=", 1) for item in line.split(":", 1)[1].split(","))
    return {k: int(v) if v.isdigit() else v for k, v in values.items()}


def test_training_jobs_ask_slurm_for_a_gpu_cpus_memory_and_time_from_the_rounds(tmp_path):
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    workdir = copy_finished_run(tmp_path / "run")
    resources = _train_resources(workdir)
    assert resources["gpu"] == 1 and resources["cpus_per_gpu"] == 1
    assert resources["runtime"] == 13  # 10 min + 15 rounds x execution.seconds_per_round (10 s), rounded up
    # Memory from the job's inputs, which the finished run has: 3000 MB + 4 x their size (common.smk, train_mem_mb).
    input_mb = [sum((workdir / name).stat().st_size for name in ("data/prepared/mnist5k.pt",
                f"data/partitions/mnist5k_dir0.5/seed{seed}.npz", f"data/traces/stationary/seed{seed}.npz")) / 2**20
                for seed in (0, 1)]
    assert resources["mem_mb"] in {int(3000 + 4 * size) for size in input_mb}

    class Resources(dict):
        __getattr__ = dict.__getitem__

    job = SimpleNamespace(resources=Resources(resources), threads=1, name="train")
    profile = _profile("slurm")
    assert int(profile["retries"]) >= 1  # a failed or timed-out job is resubmitted with more memory and time
    settings = SimpleNamespace(requeue=profile["slurm-requeue"] == "True", no_requeue=False, qos=None,
                               reservation=None)
    params = {"run_uuid": "u", "slurm_logfile": "l", "comment_str": "c", "account": " -A acct",
              "partition": " -p gpu", "workdir": str(workdir)}
    sbatch = get_submit_command(job, params, settings) + set_gres_string(job)
    for option in ("--gpus=1", "--cpus-per-gpu=1", "-t 13", f"--mem {resources['mem_mb']}", "--requeue",
                   "-A acct", "-p gpu"):
        assert option in sbatch, (option, sbatch)
    assert "--gres" not in sbatch

    # A GPU-less cluster: the override the real-cluster test uses.
    resources = _train_resources(workdir, *GPU_LESS)
    resources["mem_mb"] = 3100
    job = SimpleNamespace(resources=Resources(resources), threads=1, name="train")
    sbatch = get_submit_command(job, params, settings) + set_gres_string(job)
    assert "--gpus" not in sbatch and "--cpus-per-task=1" in sbatch


def _cluster_script(action: str, folder: Path, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(["timeout", "-s", "KILL", str(timeout), sys.executable, str(SCRIPT), action, str(folder)],
                          capture_output=True, text=True, timeout=timeout + 10)


@pytest.fixture(scope="module")
def cluster():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from slurm_cluster import missing_programs
    finally:
        sys.path.pop(0)
    missing = missing_programs()
    assert not missing, f"FEDAVAIL_SLURM_TESTS=1 but {missing} are not installed (see .ci/run)"
    assert os.geteuid() == 0, "FEDAVAIL_SLURM_TESTS=1 needs root (the daemons run as root)"
    folder = Path(tempfile.mkdtemp(prefix="fedavail-slurm-"))
    started = _cluster_script("start", folder, 150)
    try:
        assert started.returncode == 0, f"cluster did not start:\n{started.stdout}\n{started.stderr}"
        yield {"SLURM_CONF": str(folder / "etc" / "slurm.conf")}
    finally:
        stopped = _cluster_script("stop", folder, 90)
        assert stopped.returncode == 0, stopped.stderr


SACCT_FIELDS = ("JobID", "Partition", "Account", "State", "ExitCode", "Timelimit", "ReqMem", "Elapsed", "Comment")


def sacct(env: dict) -> list[dict]:
    """Every record of every job, requeued ones included (-D: a preempted job has a PREEMPTED record first)."""
    result = subprocess.run(["sacct", "-D", "-X", "-n", "-P", "-o", ",".join(f"{f}%200" for f in SACCT_FIELDS)],
                            env=env, capture_output=True, text=True, timeout=30, check=True)
    return [dict(zip(SACCT_FIELDS, line.split("|"))) for line in result.stdout.splitlines() if line.strip()]


def with_long_experiment(workdir: Path, rounds: int = 200) -> str:
    """config/test.yaml plus an experiment whose training runs long enough (~60 ms a round) to be preempted."""
    config = load_config([workdir / "config/test.yaml"])
    config["traces"]["long"] = dict(config["traces"]["stationary"], rounds=rounds)
    training = dict(config["experiments"]["tiny"]["training"], rounds=rounds, eval_every=100, last_n=2)
    config["experiments"]["long"] = {"partition": "mnist5k_dir0.5", "trace": "long",
                                     "algorithms": ["fedavg_active"], "training": training}
    (workdir / "config/slurm-test.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return "config/slurm-test.yaml"


def preempt_when_checkpointed(workdir: Path, env: dict, deadline: float, run: subprocess.Popen) -> str | None:
    """Once a long run has written its first checkpoint, submit a job to `urgent` that needs the whole node: SLURM
    preempts the running jobs (SIGTERM; they checkpoint and stop) and requeues them (profiles/slurm: --requeue)."""
    checkpoints = workdir / "results/runs/long"
    while time.monotonic() < deadline and run.poll() is None:
        pending = subprocess.run(["squeue", "-h", "-o", "%r"], env=env, capture_output=True, text=True, timeout=30)
        assert "PartitionConfig" not in pending.stdout, "a job asks for more than the node has"
        if any(checkpoints.rglob("checkpoint.pt")) if checkpoints.exists() else False:
            return subprocess.run(["sbatch", "--parsable", "-p", "urgent", f"--cpus-per-task={os.cpu_count()}",
                                   "--mem=100", "-o", "/dev/null", "--wrap", "sleep 1"],
                                  env=env, capture_output=True, text=True, timeout=30, check=True).stdout.strip()
        time.sleep(0.2)
    return None


@real_cluster
@pytest.mark.timeout(900)
def test_test_config_runs_under_slurm_survives_preemption_and_matches_a_local_run(cluster, tmp_path):
    reference = finished_run()  # the local run of the session (made now if no other test needed it yet)
    workdir = copy_workflow_files(tmp_path / "slurm")
    configfile = with_long_experiment(workdir)
    env = run_env({**cluster, "FEDAVAIL_SLURM_PARTITION": PARTITION, "FEDAVAIL_SLURM_ACCOUNT": ACCOUNT})
    command = ["timeout", "-s", "KILL", "600", sys.executable, "-m", "snakemake", "--workflow-profile",
               "profiles/slurm", "--configfile", configfile, *GPU_LESS, *SMALL_NODE, *FAST_STATUS]
    started = time.monotonic()
    snakemake_run = subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(snakemake_run.stdout), daemon=True)
    reader.start()
    try:
        urgent = preempt_when_checkpointed(workdir, env, started + 400, snakemake_run)
        returncode = snakemake_run.wait(timeout=660)
    finally:
        if snakemake_run.poll() is None:  # a failed check: stop the Snakemake we started (its own process group)
            os.killpg(snakemake_run.pid, signal.SIGKILL)
            snakemake_run.wait()
        reader.join(timeout=10)
    log = "".join(output)
    print(f"snakemake took {time.monotonic() - started:.0f} s; its log ends:\n{log[-1500:]}")
    assert returncode == 0, log[-10000:]
    assert urgent, "no long training run wrote a checkpoint in time"

    jobs = sacct(env)
    print("sacct -D -X:\n" + "|".join(SACCT_FIELDS) + "\n" + "\n".join("|".join(job.values()) for job in jobs))
    ours = [job for job in jobs if job["JobID"] != urgent]
    final = {job["JobID"]: job for job in ours}  # a job's last record is its final state
    assert all(job["State"] == "COMPLETED" and job["ExitCode"] == "0:0" for job in final.values()), jobs
    assert {job["Partition"] for job in ours} == {PARTITION}
    assert {job["Account"] for job in ours} == {ACCOUNT}
    # One SLURM job per training run, with its time limit from the rounds; the short CPU jobs in two grouped
    # submissions (all data preparation; all reports).
    comments = sorted(job["Comment"] for job in final.values())
    trains = [job for job in final.values() if job["Comment"].startswith("rule_train_")]
    assert len(trains) == 6 and len(final) == 8, comments
    assert {job["Timelimit"] for job in trains if "_tiny_" in job["Comment"]} == {"00:13:00"}, jobs
    # 10 min + rounds x execution.seconds_per_round (10 s), rounded up to minutes.
    assert {job["Timelimit"] for job in trains if "_long_" in job["Comment"]} == {"00:44:00"}, jobs
    # Memory from the data size: 3000 MB + 4 x the inputs (a few MB here).
    assert all(3000 < int(job["ReqMem"].rstrip("M")) < 3200 for job in trains), jobs
    assert any(c.startswith("rule_data_") for c in comments) and any(c.startswith("rule_reports_") for c in comments)

    # Preempted long runs were requeued by SLURM and resumed from their checkpoints.
    preempted = {job["JobID"] for job in ours if job["State"] == "PREEMPTED"}
    long_preempted = [final[j]["Comment"] for j in preempted if "_long_" in final[j]["Comment"]]
    assert long_preempted, jobs
    for comment in long_preempted:
        seed = comment.rsplit("_", 1)[1]
        train_log = (workdir / f"logs/train/long/fedavg_active/seed{seed}.log").read_text()
        assert re.search(r"start: resuming at round [1-9]", train_log), train_log[-2000:]
        summary = (workdir / f"results/runs/long/fedavg_active/seed{seed}/summary.json").read_text()
        assert '"rounds_completed": 200' in summary

    assert_same_results(workdir, reference, "tiny")
    # Everything is done: the same profile has nothing left to submit.
    again = snakemake(workdir, "--workflow-profile", "profiles/slurm", "--configfile", configfile, *GPU_LESS,
                      "--dry-run", env=env)
    assert "Nothing to be done" in again.stdout + again.stderr
