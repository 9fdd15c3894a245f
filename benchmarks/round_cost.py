"""Round cost: one federated round of fedavail against a plain PyTorch training loop over exactly the same samples.

    python benchmarks/round_cost.py [--repeats 5] [--device cpu|cuda]

For the FedSWE SVHN CNN it times (a) 10 participants x 10 steps x batch 128 and (b) 50 participants x 10 steps x
batch 32. The plain loop is what a user would write without FL machinery: one nn.Module, torch.optim.SGD, the same
minibatches (same indices, same normalisation, same gradient clipping). It prints the median seconds of each and the
ratio (target on CPU: <= 1.2). On CUDA it also times the vmap-batched engine against the per-client loop at 100
clients (target >= 5x)."""

import argparse
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from fedavail.algorithms.base import RoundContext
from fedavail.algorithms.fedavg import FedAvg
from fedavail.data.prepared import channel_stats
from fedavail.engine.client_data import Augmentation, ClientData
from fedavail.engine.local import LocalSpec, train_clients
from fedavail.engine.params import FlatModel
from fedavail.launcher import ensure_malloc_settings
from fedavail.models import build_model

TRAIN_SAMPLES = 20_000
NUM_CLIENTS = 100


def svhn_like(device) -> dict:
    generator = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (TRAIN_SAMPLES, 3, 32, 32), dtype=torch.uint8, generator=generator)
    y = torch.randint(0, 10, (TRAIN_SAMPLES,), generator=generator)
    mean, std = channel_stats(x[:2000])
    return {"name": "svhn_like", "kind": "image", "num_classes": 10, "train_x": x, "train_y": y,
            "test_x": x[:10], "test_y": y[:10], "mean": mean, "std": std, "meta": {}}


def federated_round(model, data, algorithm, state, clients, spec, round_index, batched, device):
    available = torch.zeros(NUM_CLIENTS, dtype=torch.bool, device=device)
    available[clients] = True
    ctx = RoundContext(round_index, available, None, None, spec.lr, spec.steps, torch.Generator())
    chosen = algorithm.select(state, ctx)
    starts = algorithm.start_points(state, chosen, ctx)
    result = train_clients(model, data, chosen.cpu(), starts, spec, None, 0, round_index, batched)
    return algorithm.aggregate(state, chosen, result, ctx)


def plain_loop(module, batches, spec):
    optimizer = torch.optim.SGD(module.parameters(), lr=spec.lr)
    module.train()
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(module(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), spec.grad_clip)
        optimizer.step()


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, repeats, device):
    seconds = []
    for _ in range(repeats):
        synchronize(device)
        started = time.perf_counter()
        fn()
        synchronize(device)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def compare(dataset, participants, batch_size, repeats, device):
    module = build_model("fedswe_svhn_cnn", dataset, seed=0).to(device)
    model = FlatModel(module)
    offsets = np.linspace(0, TRAIN_SAMPLES, NUM_CLIENTS + 1).astype(np.int64)
    indices = np.arange(TRAIN_SAMPLES)
    data = ClientData(dataset, offsets, indices, device, Augmentation())
    spec = LocalSpec(steps=10, batch_size=batch_size, lr=0.05, grad_clip=0.5)
    clients = torch.arange(participants)
    algorithm = FedAvg()
    state = algorithm.init_state(model.flatten(), data.client_sizes())
    # The plain loop sees exactly the minibatches the round draws (same keyed streams), prepared up front.
    batches = [b for c in clients.tolist() for b in data.client_stream(0, 0, c, spec.steps, spec.batch_size)]
    results = {
        "fedavail round": timed(lambda: federated_round(model, data, algorithm, state, clients, spec, 0, False,
                                                        device), repeats, device),
        "plain loop": timed(lambda: plain_loop(module, batches, spec), repeats, device),
    }
    print(f"{participants} participants x {spec.steps} steps x batch {batch_size} on {device}:")
    for name, seconds in results.items():
        print(f"  {name:16s} {seconds:8.3f} s")
    print(f"  ratio round / plain loop: {results['fedavail round'] / results['plain loop']:.3f}")
    if device.type == "cuda":
        everyone = torch.arange(NUM_CLIENTS)
        loop = timed(lambda: federated_round(model, data, algorithm, state, everyone, spec, 0, False, device),
                     repeats, device)
        batched = timed(lambda: federated_round(model, data, algorithm, state, everyone, spec, 0, True, device),
                        repeats, device)
        print(f"  {NUM_CLIENTS} clients: per-client loop {loop:.3f} s, vmap-batched {batched:.3f} s, "
              f"speed-up {loop / batched:.2f}x")


def main():
    # The same malloc settings as `fedavail train`, so the round is timed as the pipeline runs it.
    ensure_malloc_settings([sys.executable, *sys.argv])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dataset = svhn_like(device)
    print(f"torch {torch.__version__}, {args.threads} threads")
    for participants, batch_size in ((10, 128), (50, 32)):
        compare(dataset, participants, batch_size, args.repeats, device)


if __name__ == "__main__":
    main()
