"""Seconds per round of a whole FedSWE SVHN-CNN training run on synthetic SVHN-shaped data.

    python benchmarks/synthetic_run.py [--rounds 200] [--device auto|cpu|cuda] [--batched auto|true|false]

SVHN's shape (73,257 train / 26,032 test uint8 3x32x32 images, 10 classes; random pixels and labels), partitioned
Dirichlet(0.1) over 100 clients, FedSWE's stationary availability, and FedSWE (k = 0, lr 0.1) with the FedSWE SVHN
training settings of config/fedswe.yaml (10 local steps, batch 128, crop augmentation, evaluation every 20 rounds).
It runs fedavail.train.run as a training job does and prints the median and mean seconds per round (rounds with and
without evaluation) and the run's wall time. --rounds 2 --local-steps 1 --device cpu checks it on a CPU in a
minute or two."""

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import torch

from fedavail.availability.traces import make_trace, save_trace
from fedavail.data.prepared import channel_stats, save_prepared
from fedavail.launcher import ensure_malloc_settings
from fedavail.partitions.partition import make_partition, save_partition
from fedavail.train import Execution, run

TRAIN, TEST, CLIENTS = 73_257, 26_032, 100


def svhn_shaped(seed: int = 0) -> dict:
    generator = torch.Generator().manual_seed(seed)
    train_x = torch.randint(0, 256, (TRAIN, 3, 32, 32), dtype=torch.uint8, generator=generator)
    test_x = torch.randint(0, 256, (TEST, 3, 32, 32), dtype=torch.uint8, generator=generator)
    mean, std = channel_stats(train_x[:5000])
    return {"name": "svhn_shaped", "kind": "image", "num_classes": 10, "train_x": train_x,
            "train_y": torch.randint(0, 10, (TRAIN,), generator=generator), "test_x": test_x,
            "test_y": torch.randint(0, 10, (TEST,), generator=generator), "mean": mean, "std": std,
            "meta": {"source": "synthetic"}}


def main():
    ensure_malloc_settings([sys.executable, *sys.argv])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--local-steps", type=int, default=10, help="fewer only to check the script quickly")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batched", default="auto", choices=["auto", "true", "false"])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    spec = {"seed": 0, "experiment": "synthetic_svhn", "algorithm_id": "fedswe_k0",
            "algorithm": {"algorithm": "fedswe", "k": 0, "lr": 0.1},
            "training": {"model": "fedswe_svhn_cnn", "rounds": args.rounds, "eval_every": 20, "last_n": 0,
                         "augmentation": {"crop_padding": 4},
                         "local": {"steps": args.local_steps, "batch_size": 128, "schedule": "sqrt_decay",
                                   "grad_clip": 0.5}}}
    batched = {"true": True, "false": False}.get(args.batched, "auto")
    with tempfile.TemporaryDirectory() as root:
        root = Path(root)
        dataset = svhn_shaped()
        save_prepared(root / "data.pt", dataset)
        partition = make_partition(dataset["train_y"].numpy(), 10, {"scheme": "client_dirichlet",
                                                                    "num_clients": CLIENTS, "alpha": 0.1}, seed=0)
        save_partition(root / "partition.npz", partition)
        save_trace(root / "trace.npz", make_trace({"model": "fedswe", "dynamics": "stationary"}, CLIENTS,
                                                  args.rounds, seed=0, partition=partition))
        execution = Execution(threads=args.threads, device=args.device, batched=batched,
                              checkpoint_every=args.rounds + 1, log_every=max(args.rounds // 10, 1))
        summary = run(root / "data.pt", root / "partition.npz", root / "trace.npz", root / "run", spec, execution)
        metrics = pq.read_table(root / "run/metrics.parquet", columns=["seconds", "participants"]).to_pydict()
    seconds = metrics["seconds"]
    provenance = summary["provenance"]
    print(f"FedSWE SVHN CNN, {args.rounds} rounds of {args.local_steps} local steps on {provenance['device']} "
          f"(batched: {provenance['batched']}), "
          f"{statistics.mean(metrics['participants']):.1f} participants per round on average")
    print(f"  seconds per round: median {statistics.median(seconds):.3f}, mean {statistics.mean(seconds):.3f}; "
          f"run wall time {summary['wall_seconds']:.1f} s")


if __name__ == "__main__":
    main()
