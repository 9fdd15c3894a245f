"""Roofline: what the whole local step achieves, in GFLOP/s, against this machine's own matrix-product rate, per model
and batch as the configs train them.

    python benchmarks/roofline.py [--repeats 5] [--threads 1] [--device cpu|cuda] [--workloads NAME ...] [--src DIR]

A workload is one round of local work for W clients through the engine (fedavail.engine.local, the back end that
`execution.batched: auto` picks): the keyed minibatches gathered from the train set, forward, backward, the local
optimizer and the per-step loss and accuracy, on synthetic data of the dataset's shape. Its FLOP are counted by
torch.utils.flop_counter over one forward and backward of the model at the workload's batch size (multiply-adds of the
convolutions and matrix products, x2; elementwise work is not counted, so it only costs time). The reference arm is a
1024^3 float32 matrix product on the same threads. Arms alternate run by run after one warm-up each; the table shows
medians of --repeats runs. `--src DIR` imports fedavail from another checkout's src/ (an older engine, say): run the
script once with it and once without, alternately, to compare engines under the same conditions."""

import argparse
import statistics
import sys
import time

import numpy as np
import torch


def arguments():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--workloads", nargs="+")
    parser.add_argument("--src", help="import fedavail from this src/ folder instead of the installed one")
    return parser.parse_args()


ARGS = arguments()
if ARGS.src:
    sys.path.insert(0, ARGS.src)

from fedavail.data.prepared import channel_stats  # noqa: E402
from fedavail.engine.backend import picks_vmap  # noqa: E402
from fedavail.engine.client_data import ClientData  # noqa: E402
from fedavail.engine.local import ClientTrainer  # noqa: E402
from fedavail.engine.params import FlatModel  # noqa: E402
from fedavail.launcher import ensure_malloc_settings  # noqa: E402
from fedavail.models import build_model  # noqa: E402
from fedavail.plan.experiments import AugmentationOptions  # noqa: E402
from fedavail.plan.local import resolve_local  # noqa: E402

SEED, GEMM_SIZE = 0, 1024
FEDSWE_SMALL = {"lr": 0.05, "steps": 5, "batch_size": 16}  # config/config.yaml, claims.yaml: the FedSWE part
FAST_SMALL = {"optimizer": "adam", "lr": 0.003, "optimizer_state": "persistent", "epochs": 1, "max_steps": 10,
              "batch_size": 16}  # ... the FAST part (3 steps: 40 samples per client)
# Client sizes like those of FedLab's hetero_dir at α = 0.1 on MNIST-5k (the FAST part): mean 40, 1 to 6 steps of 16.
SKEWED_SIZES = (6, 16, 30, 40, 60, 88)
# name: (model, (channels, size, classes), samples per client (a number, or sizes the clients cycle through), local
# settings, clients per round of the process)
WORKLOADS = {
    "small_cnn@16 sgd x10": ("small_cnn", (1, 28, 10), 40, FEDSWE_SMALL, 10),  # one run's round, few participants
    "small_cnn@16 sgd x33": ("small_cnn", (1, 28, 10), 40, FEDSWE_SMALL, 33),  # one FedSWE stationary run's round
    "small_cnn@16 sgd x165": ("small_cnn", (1, 28, 10), 40, FEDSWE_SMALL, 165),  # its five seeds in one process
    "small_cnn@16 adam x50": ("small_cnn", (1, 28, 10), 40, FAST_SMALL, 50),  # five FAST seeds in one process
    "small_cnn@16 adam x50 skewed": ("small_cnn", (1, 28, 10), SKEWED_SIZES, FAST_SMALL, 50),  # ... unequal sizes
    "fast_cnn_fmnist@128 adam x10": ("fast_cnn_fmnist", (1, 28, 10), 600,
                                     {"optimizer": "adam", "lr": 0.001, "optimizer_state": "persistent", "epochs": 1,
                                      "max_steps": 10, "batch_size": 128}, 10),  # config/fast.yaml
    "fast_cnn_cifar10@128 momentum x10": ("fast_cnn_cifar10", (3, 32, 10), 500,
                                          {"optimizer": "momentum", "lr": 0.01, "optimizer_state": "persistent",
                                           "epochs": 1, "max_steps": 10, "batch_size": 128}, 10),
    "fedswe_svhn_cnn@128 sgd x10": ("fedswe_svhn_cnn", (3, 32, 10), 733, {"lr": 0.05, "steps": 10,
                                                                          "batch_size": 128}, 10),  # fedswe.yaml
}


def synthetic_data(shape, sizes: list[int], device: torch.device):
    channels, size, classes = shape
    samples = sum(sizes)
    generator = torch.Generator().manual_seed(SEED)
    x = torch.randint(0, 256, (samples, channels, size, size), dtype=torch.uint8, generator=generator)
    y = torch.randint(0, classes, (samples,), generator=generator)
    mean, std = channel_stats(x[:2000])
    dataset = {"name": "synthetic", "kind": "image", "num_classes": classes, "train_x": x, "train_y": y,
               "test_x": x[:10], "test_y": y[:10], "mean": mean, "std": std, "meta": {}}
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return dataset, ClientData(dataset, offsets, np.arange(samples), device, AugmentationOptions())


def flop_per_sample(model_name: str, dataset: dict, batch: int, device: torch.device) -> float:
    from torch.utils.flop_counter import FlopCounterMode

    module = build_model(model_name, dataset, SEED).to(device)
    x = torch.randn(batch, *dataset["train_x"].shape[1:], device=device)
    y = torch.randint(0, dataset["num_classes"], (batch,), device=device)
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.cross_entropy(module(x), y).backward()
    return counter.get_total_flops() / batch


def workload_arm(name: str, device: torch.device):
    """(setup returning the timed call, samples per call, FLOP per sample, back end)."""
    model_name, shape, per_client, local, clients = WORKLOADS[name]
    sizes = [per_client[c % len(per_client)] if isinstance(per_client, tuple) else per_client for c in range(clients)]
    dataset, data = synthetic_data(shape, sizes, device)
    options = resolve_local(local, None, "local")
    batched = picks_vmap(model_name, options.batch_size, device)
    model = FlatModel(build_model(model_name, dataset, SEED).to(device))
    trainer = ClientTrainer(model, data, options, SEED, batched)
    starts = model.flatten().expand(clients, -1)
    every = torch.arange(clients, device=device)
    # samples trained per round: `steps` full batches, or one epoch capped at max_steps batches
    cap = (options.max_steps or 10**9) * options.batch_size
    samples = sum(options.steps * options.batch_size if options.steps else min(size, cap) for size in sizes)
    rounds = iter(range(10**9))

    def setup():
        state = trainer.init_state(clients, starts.dtype, device)
        return lambda: trainer.train(every, starts, None, next(rounds), options.lr, state).end
    return setup, samples, flop_per_sample(model_name, dataset, options.batch_size, device), \
        "vmap" if batched else "loop"


def gemm_arm(device: torch.device):
    a, b = (torch.randn(GEMM_SIZE, GEMM_SIZE, device=device) for _ in range(2))
    return lambda: (lambda: a @ b)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main():
    ensure_malloc_settings([sys.executable, *sys.argv])  # the train rule's allocator settings
    torch.set_num_threads(ARGS.threads)
    device = torch.device(ARGS.device)
    names = ARGS.workloads or list(WORKLOADS)
    arms = {"gemm": (gemm_arm(device), None, 2 * GEMM_SIZE**3, "")}
    for name in names:
        setup, samples, flop, back_end = workload_arm(name, device)
        arms[name] = (setup, samples, flop, back_end)
    seconds = {name: [] for name in arms}
    for repeat in range(ARGS.repeats + 1):
        for name, (setup, *_) in arms.items():
            run = setup()
            synchronize(device)
            started = time.perf_counter()
            run()
            synchronize(device)
            if repeat:
                seconds[name].append(time.perf_counter() - started)
    rate = {}
    for name, (_, samples, flop, _) in arms.items():
        total = flop if samples is None else flop * samples
        rate[name] = total / statistics.median(seconds[name]) / 1e9
    print(f"torch {torch.__version__}, {ARGS.threads} thread(s), device {device}, fedavail from "
          f"{ARGS.src or 'the installed package'}; medians of {ARGS.repeats} alternated runs")
    print(f"GEMM {GEMM_SIZE}^3 float32: {rate['gemm']:.1f} GFLOP/s")
    print("| workload | back end | MFLOP/sample | µs/sample | GFLOP/s | of GEMM |")
    print("|---|---|---|---|---|---|")
    for name in names:
        _, samples, flop, back_end = arms[name]
        per_sample = 1e6 * statistics.median(seconds[name]) / samples
        print(f"| {name} | {back_end} | {flop / 1e6:.2f} | {per_sample:.1f} | {rate[name]:.1f} | "
              f"{100 * rate[name] / rate['gemm']:.0f}% |")


if __name__ == "__main__":
    main()
