"""A training job's start-up: malloc settings from the train rule's environment, no re-execution, no plotting
libraries imported; the benchmarks' re-execution with the settings."""

import json
import os
import shlex
import subprocess
import sys

import pandas as pd
from synthetic import image_dataset
from workflow_helpers import copy_workflow, snakemake

from fedavail.availability.traces import make_trace, save_trace
from fedavail.data.prepared import save_prepared
from fedavail.launcher import MALLOC_SETTINGS
from fedavail.partitions.partition import make_partition, save_partition


def test_a_process_without_the_settings_reexecutes_itself_with_them():
    env = {k: v for k, v in os.environ.items() if k not in MALLOC_SETTINGS}
    show = "import os; print(os.environ['MALLOC_TRIM_THRESHOLD_'], os.environ['MALLOC_MMAP_THRESHOLD_'])"
    code = (f"import sys; from fedavail.launcher import ensure_malloc_settings; "
            f"ensure_malloc_settings([sys.executable, '-c', {show!r}]); print('not re-executed')")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.split() == [MALLOC_SETTINGS["MALLOC_TRIM_THRESHOLD_"],
                                     MALLOC_SETTINGS["MALLOC_MMAP_THRESHOLD_"]]


def test_the_train_rule_starts_fedavail_train_with_the_settings(tmp_path):
    workdir = copy_workflow(tmp_path / "workflow")
    dry_run = snakemake(workdir, "--dry-run", "--printshellcmds", "--configfile", "config/test.yaml").stdout
    commands = [line for line in dry_run.splitlines() if " fedavail train " in line]
    assert commands, dry_run
    for command in commands:
        # Run the command's own shell prefix in front of a probe instead of `fedavail train`.
        prefix = command.removeprefix("Shell command:").split(" fedavail train ")[0]
        probe = shlex.join([sys.executable, "-c",
                            f"import os; print(*(os.environ.get(k) for k in {sorted(MALLOC_SETTINGS)!r}))"])
        env = {k: v for k, v in os.environ.items() if k not in MALLOC_SETTINGS}
        shown = subprocess.run(["bash", "-c", f"{prefix} {probe}"], env=env, capture_output=True, text=True,
                               check=True).stdout.split()
        assert shown == [MALLOC_SETTINGS[k] for k in sorted(MALLOC_SETTINGS)], command


def test_a_training_process_neither_reexecutes_nor_imports_plotting_libraries(tmp_path):
    dataset = image_dataset(train=100, test=20)
    save_prepared(tmp_path / "data.pt", dataset)
    partition = make_partition(dataset["train_y"].numpy(), 10, {"scheme": "client_dirichlet", "num_clients": 4,
                                                                 "alpha": 0.5}, seed=0)
    save_partition(tmp_path / "partition.npz", partition)
    save_trace(tmp_path / "trace.npz", make_trace({"model": "fedswe", "dynamics": "sine"}, 4, 2, seed=0,
                                                  partition=partition))
    spec = {"seed": 0, "algorithm": {"algorithm": "fedavg", "lr": 0.05, "weighting": "known"},
            "training": {"model": "small_cnn", "rounds": 2, "local_steps": 1, "batch_size": 8,
                         "lr_schedule": "constant", "eval_every": 1, "last_n": 0, "train_eval_samples": 10}}
    env = {k: v for k, v in os.environ.items() if k not in MALLOC_SETTINGS}
    # -X importtime lists every import of this process; a re-executed process would not inherit the flag.
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "fedavail", "train", "--prepared",
                             str(tmp_path / "data.pt"), "--partition", str(tmp_path / "partition.npz"), "--trace",
                             str(tmp_path / "trace.npz"), "--out-dir", str(tmp_path / "run"), "--spec",
                             json.dumps(spec)], env=env, capture_output=True, text=True, check=True)
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if "|" in line}
    assert {"fedavail.train", "torch"} <= imported
    assert not {"matplotlib", "seaborn", "torchvision", "scipy", "sklearn"} & imported
    assert len(pd.read_parquet(tmp_path / "run/metrics.parquet")) == 2
