"""Many seeds in one process against separate runs: wall time, and how far each seed's metrics are from its separate
run's.

    python benchmarks/many_seeds.py [--seeds 3] [--rounds 20] [--device auto|cpu|cuda] [--dtype float32|float64]

FedSWE (k = 0, lr 0.1) with the SVHN CNN on synthetic SVHN-shaped data (benchmarks/synthetic_run.py), 100 clients,
Dirichlet(0.1) partitions and stationary traces, one per seed, as the workflow makes them. Both arms use the same
back end (vmap on CUDA, `--batched` to choose): `fedavail.train.run_together` with all seeds (one vmap over all
seeds' participants per local step) and one `run_together` per seed. On the per-client loop the metrics agree exactly;
on vmap to the reassociation of batched kernels (float64: far below 1e-9; float32: a few ulps, amplified by local
SGD).
--rounds 2 --local-steps 1 --device cpu checks the script on a CPU."""

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import torch
from synthetic_run import CLIENTS, svhn_shaped

from fedavail.availability.traces import make_trace, save_trace
from fedavail.data.prepared import save_prepared
from fedavail.launcher import ensure_malloc_settings
from fedavail.partitions.partition import make_partition, save_partition
from fedavail.train import Execution, RunInputs, run_together


def _inputs(root: Path, dataset: dict, seeds: list[int], rounds: int, local_steps: int) -> list[RunInputs]:
    training = {"model": "fedswe_svhn_cnn", "rounds": rounds, "eval_every": 10, "last_n": 1,
                "train_eval_samples": 2000, "augmentation": {"crop_padding": 4},
                "local": {"steps": local_steps, "batch_size": 128, "schedule": "sqrt_decay", "grad_clip": 0.5}}
    inputs = []
    for seed in seeds:
        partition = make_partition(dataset["train_y"].numpy(), 10, {"scheme": "client_dirichlet",
                                                                    "num_clients": CLIENTS, "alpha": 0.1}, seed=seed)
        save_partition(root / f"partition{seed}.npz", partition)
        save_trace(root / f"trace{seed}.npz", make_trace({"model": "fedswe", "dynamics": "stationary"}, CLIENTS,
                                                         rounds, seed=seed, partition=partition))
        spec = {"seed": seed, "experiment": "synthetic_svhn", "algorithm_id": "fedswe_k0", "training": training,
                "algorithm": {"algorithm": "fedswe", "k": 0, "lr": 0.1}}
        inputs.append(RunInputs(root / f"partition{seed}.npz", root / f"trace{seed}.npz", root, spec))
    return inputs


def _max_difference(together: Path, alone: Path) -> float:
    a, b = (pd.read_parquet(p / "metrics.parquet").drop(columns="seconds") for p in (together, alone))
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        return float("inf")
    return float((a - b).abs().max().max())


def main():
    ensure_malloc_settings([sys.executable, *sys.argv])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--local-steps", type=int, default=10)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batched", default="auto", choices=["auto", "true", "false"])
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    seeds, dtype = list(range(args.seeds)), getattr(torch, args.dtype)
    execution = Execution(threads=args.threads, device=args.device,
                          batched={"true": True, "false": False}.get(args.batched, "auto"),
                          checkpoint_every=args.rounds + 1, log_every=args.rounds)
    with tempfile.TemporaryDirectory() as root:
        root = Path(root)
        dataset = svhn_shaped()
        save_prepared(root / "data.pt", dataset)
        inputs = _inputs(root, dataset, seeds, args.rounds, args.local_steps)
        started = time.perf_counter()
        summaries = run_together(root / "data.pt", [replace(run, out_dir=root / f"together/seed{run.seed}")
                                                    for run in inputs], execution, dtype=dtype)
        together = time.perf_counter() - started
        alone, differences = 0.0, []
        for run in inputs:
            started = time.perf_counter()
            run_together(root / "data.pt", [replace(run, out_dir=root / f"alone/seed{run.seed}")], execution,
                         dtype=dtype)
            alone += time.perf_counter() - started
            differences.append(_max_difference(root / f"together/seed{run.seed}", root / f"alone/seed{run.seed}"))
    provenance = summaries[0]["provenance"]
    print(f"FedSWE SVHN CNN, {args.seeds} seeds x {args.rounds} rounds of {args.local_steps} local steps, "
          f"{args.dtype} on {provenance['device']} (batched: {provenance['batched']})")
    print(f"  wall time: {together:.1f} s in one process, {alone:.1f} s as separate runs "
          f"({alone / together:.2f}x); loading and set-up included in both")
    print(f"  largest |metric difference| per seed, one process vs separate: "
          + ", ".join(f"seed {s}: {d:.3g}" for s, d in zip(seeds, differences)))


if __name__ == "__main__":
    main()
