"""Start-up share of a training job: the fixed cost of a `fedavail train` process against its training time.

    python benchmarks/startup.py --run-dir results/runs/EXP/ALG/seed0 --prepared data/prepared/DATA.pt \
        --partition data/partitions/PART/seed0.npz --trace data/traces/TRACE/seed0.npz [--repeats 3] [--no-rule-env]

Takes a finished run of the workflow (its summary.json gives the spec, its metrics.parquet the seconds of every
round) and runs the same `fedavail train` command, cut to --rounds rounds, --repeats times in fresh processes. A
process's fixed cost is its wall time minus the seconds of its rounds: interpreter, imports, loading the prepared
data, partition and trace, building the model, writing the outputs and exiting. The share printed is
fixed / (fixed + the finished run's round seconds), i.e. of a whole job of that run.

By default each process gets the train rule's environment (fedavail.launcher's malloc settings, as the rule sets
them); --no-rule-env leaves them out, as a command typed by hand would."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from fedavail.launcher import MALLOC_SETTINGS


def round_seconds(metrics: Path) -> float:
    return float(sum(pq.read_table(metrics, columns=["seconds"]).column("seconds").to_pylist()))


def fixed_cost(args, spec: dict, env: dict) -> float:
    with tempfile.TemporaryDirectory() as out_dir:
        command = [sys.executable, "-m", "fedavail", "train", "--prepared", str(args.prepared), "--partition",
                   str(args.partition), "--trace", str(args.trace), "--out-dir", out_dir, "--spec", json.dumps(spec),
                   "--threads", str(args.threads), "--device", "cpu"]
        started = time.perf_counter()
        subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - started
        return wall - round_seconds(Path(out_dir) / "metrics.parquet")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", type=Path, required=True, help="a finished run (summary.json, metrics.parquet)")
    parser.add_argument("--prepared", type=Path, required=True)
    parser.add_argument("--partition", type=Path, required=True)
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each timed process")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-rule-env", action="store_true", help="without the train rule's malloc settings")
    args = parser.parse_args()
    summary_path = args.run_dir / "summary.json"
    if not summary_path.exists():
        parser.error(f"{summary_path} does not exist: --run-dir must be a finished run")
    spec = json.loads(summary_path.read_text())["spec"]
    training = round_seconds(args.run_dir / "metrics.parquet")
    spec["training"] = {**spec["training"], "rounds": args.rounds}
    env = {k: v for k, v in os.environ.items() if k not in MALLOC_SETTINGS}
    if not args.no_rule_env:
        env.update(MALLOC_SETTINGS)
    costs = [fixed_cost(args, spec, env) for _ in range(args.repeats)]
    fixed = statistics.median(costs)
    print(f"fixed cost per process: median {fixed:.2f} s, min {min(costs):.2f} s "
          f"({', '.join(f'{c:.2f}' for c in costs)})")
    print(f"training time of {args.run_dir}: {training:.2f} s; start-up share of the job: "
          f"{fixed / (fixed + training):.1%}")


if __name__ == "__main__":
    main()
