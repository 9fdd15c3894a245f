"""Algorithm cost: every algorithm of a config's round against FedAvg's on one workload, with its state memory.

    python benchmarks/algorithm_cost.py [--config config/config.yaml] [--rounds 10] [--repeats 3] [--threads 1]
                                        [--batched auto|true|false] [--device cpu|cuda]

The workload is the default run's: small_cnn on MNIST-shaped data (1x28x28, 10 classes), 100 clients of 40 samples,
5 local steps at batch 16, the config's local optimizer block. Every algorithm sees the same rounds: availability
Bernoulli(0.1) per client and round, p_i^t = 0.1 for the algorithms that read it, and a uniform cohort of 10 for
FAST's snapshot rounds, all drawn once from fixed generators. A timed arm runs --rounds rounds from a fresh state
(selection, start points, correction, local training, aggregation: what fedavail.train runs per round, without
evaluation); arms alternate repeat by repeat after one warm-up each. Printed per algorithm: median seconds per round,
its ratio to the reference (FedAvg over active clients), participants per round, its state in bytes (server and
per-client tables, optimizer state included), that state in model vectors (d floats each) and the extra work it does
beyond FedAvg."""

import argparse
import statistics
import sys

import numpy as np
import torch

from peers import alternated

from fedavail.algorithms import build_algorithm
from fedavail.algorithms.base import RoundContext, local_work, state_bytes
from fedavail.data.prepared import channel_stats
from fedavail.engine.backend import picks_vmap
from fedavail.engine.client_data import ClientData
from fedavail.engine.local import ClientTrainer, LocalWork, train_together
from fedavail.engine.params import FlatModel
from fedavail.launcher import ensure_malloc_settings
from fedavail.models import build_model
from fedavail.plan.experiments import AugmentationOptions
from fedavail.plan.load import load_config
from fedavail.plan.local import resolve_local
from fedavail.rng import torch_generator

SEED, CLIENTS, SAMPLES_PER_CLIENT, P_AVAILABLE, SNAPSHOT_COHORT = 0, 100, 40, 0.1, 10
MODEL = "small_cnn"
REFERENCE = "fedavg_active"
LOCAL = {"steps": 5, "batch_size": 16, "schedule": "sqrt_decay", "lr": 0.05}
# What an algorithm (or a FAST base) does per round beyond FedAvg's local SGD and mean.
EXTRA_WORK = {
    "fedprox": "μ(y − x) added to every local step's gradient",
    "scaffold": "c − c_i added to every local step's gradient; the steps' mean gradient kept for c_i⁺; [m, d] c_i",
    "fedswe": "[m, d] last local models, echoed for absent clients; a k-round moving average",
    "mifa": "[m, d] last updates; their mean",
    "fedvarp": "[m, d] last updates; the variance-reduced mean",
    "gfedavg": "a second model vector z (the period's anchor); every P rounds x ← z + η(x − z)",
}


def mnist_like() -> dict:
    generator = torch.Generator().manual_seed(SEED)
    x = torch.randint(0, 256, (CLIENTS * SAMPLES_PER_CLIENT, 1, 28, 28), dtype=torch.uint8, generator=generator)
    y = torch.randint(0, 10, (len(x),), generator=generator)
    mean, std = channel_stats(x)
    return {"name": "mnist_like", "kind": "image", "num_classes": 10, "train_x": x, "train_y": y,
            "test_x": x[:10], "test_y": y[:10], "mean": mean, "std": std, "meta": {}}


def contexts(rounds: int, lr_at, device: torch.device) -> list[RoundContext]:
    """The rounds every algorithm sees (the same draws for all arms)."""
    generator = torch.Generator().manual_seed(SEED)
    rows = []
    for t in range(rounds):
        available = torch.rand(CLIENTS, generator=generator) < P_AVAILABLE
        snapshot = torch.randperm(CLIENTS, generator=generator)[:SNAPSHOT_COHORT]
        rows.append((available, snapshot))
    prob = torch.full((CLIENTS,), P_AVAILABLE, device=device)
    return [RoundContext(round=t, available=available.to(device), prob=prob, snapshot=snapshot.to(device),
                         lr=lr_at(t), generator=torch_generator(SEED, "algorithm", t))
            for t, (available, snapshot) in enumerate(rows)]


def arm(name: str, entry: dict, model: FlatModel, data: ClientData, trainer: ClientTrainer, rounds: int,
        costs: dict):
    hyperparameters = {k: v for k, v in entry.items() if k not in ("algorithm", "lr")}

    def setup():
        algorithm = build_algorithm(entry["algorithm"], hyperparameters)
        x0 = model.flatten()
        state = algorithm.init_state(x0, data.client_sizes().to(x0.device))
        local_state = trainer.init_state(CLIENTS, x0.dtype, x0.device)
        round_contexts = contexts(rounds, trainer.options.lr_at, x0.device)  # fresh generators: every run draws alike

        def run():
            nonlocal state
            participants = 0
            for ctx in round_contexts:
                clients, starts, correction = local_work(algorithm, state, ctx)
                result = train_together([LocalWork(trainer, clients, starts, correction, local_state)], ctx.round,
                                        ctx.lr)[0]
                state = algorithm.aggregate(state, clients, result, ctx)
                participants += len(clients)
            costs[name] = {"participants": participants / rounds,
                           "bytes": state_bytes(state) + state_bytes(local_state)}
        return run
    return setup


def main():
    ensure_malloc_settings([sys.executable, *sys.argv])  # the train rule's allocator settings
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batched", choices=("auto", "true", "false"), default="auto")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    algorithms = load_config([args.config])["algorithms"]
    dataset = mnist_like()
    offsets = np.arange(0, CLIENTS * SAMPLES_PER_CLIENT + 1, SAMPLES_PER_CLIENT)
    data = ClientData(dataset, offsets, np.arange(len(dataset["train_y"])), device, AugmentationOptions())
    model = FlatModel(build_model(MODEL, dataset, SEED).to(device))
    options = resolve_local(LOCAL, None, "local")
    batched = picks_vmap(MODEL, options.batch_size, device) if args.batched == "auto" \
        else args.batched == "true"
    trainer = ClientTrainer(model, data, options, SEED, batched)
    costs: dict[str, dict] = {}
    arms = {name: arm(name, entry, model, data, trainer, args.rounds, costs) for name, entry in algorithms.items()}
    seconds, _ = alternated(arms, args.repeats, device)
    per_round = {name: statistics.median(times) / args.rounds for name, times in seconds.items()}
    dimension = model.dim
    print(f"torch {torch.__version__}, {device}, {args.threads} threads, {'vmap' if batched else 'loop'} back end, "
          f"{MODEL} "
          f"(d = {dimension:,}), {CLIENTS} clients, {args.rounds} rounds per run, medians of {args.repeats} "
          f"alternated runs, config {args.config}")
    print(f"| algorithm | ms / round | / {REFERENCE} | participants / round | state bytes | state / d floats | "
          "extra work |")
    print("|---|---|---|---|---|---|---|")
    for name, entry in algorithms.items():
        extra = EXTRA_WORK.get(entry.get("base", entry["algorithm"]), "")
        print(f"| {name} | {1e3 * per_round[name]:.1f} | {per_round[name] / per_round[REFERENCE]:.2f} | "
              f"{costs[name]['participants']:.1f} | {costs[name]['bytes']:,} | "
              f"{costs[name]['bytes'] / (4 * dimension):.1f} | {extra} |")


if __name__ == "__main__":
    main()
