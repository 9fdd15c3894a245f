"""Roofline: what the whole local step achieves, in GFLOP/s, against this machine's own matrix-product rate, per model
and batch as the configs train them.

    python benchmarks/roofline.py [--repeats 5] [--threads 1] [--device cpu|cuda] [--workloads NAME ...]
    python benchmarks/roofline.py --against OLD/src [--pairs 5] [--repeats 3] [--workloads NAME ...]

A workload is one round of local work for W clients through the engine (fedavail.engine.local, the back end that
`execution.batched: auto` picks): the keyed minibatches gathered from the train set, forward, backward, the local
optimizer and the per-step loss and accuracy, on synthetic data of the dataset's shape. Its FLOP are counted by
torch.utils.flop_counter over one forward and backward of the model at the workload's batch size (multiply-adds of the
convolutions and matrix products, x2; elementwise work is not counted, so it only costs time). The reference arm is a
1024^3 float32 matrix product on the same threads (8192^3 on a GPU). Arms alternate run by run after one warm-up
each; the table shows medians of --repeats runs.

`--against DIR` compares this checkout's engine with the fedavail in another checkout's src/ (an older commit, say):
it alternates processes, this engine then that one, --pairs times, each measuring every workload and the GEMM rate
as above, and prints both engines' medians and the median of the per-pair time ratios. (`--src DIR` makes one such
process import fedavail from DIR.)"""

import argparse
import json
import statistics
import subprocess
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
    parser.add_argument("--against", help="compare with the fedavail in this src/ folder, in alternated processes")
    parser.add_argument("--pairs", type=int, default=5, help="with --against: processes per engine")
    parser.add_argument("--json", action="store_true", help="print the measurements as one JSON object")
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

SEED = 0
GEMM_SIZE = {"cpu": 1024, "cuda": 8192}  # large enough to reach the device's rate
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
        back_end_name(batched, model)


def gemm_arm(device: torch.device):
    size = GEMM_SIZE[device.type]
    a, b = (torch.randn(size, size, device=device) for _ in range(2))
    return lambda: (lambda: a @ b)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def back_end_name(batched: bool, model: FlatModel) -> str:
    if not batched:
        return "loop"
    try:
        from fedavail.engine import grouped
    except ImportError:  # an engine from before the grouped path
        return "vmap"
    return "grouped" if grouped.supports(model) and model.flat.device.type == "cpu" else "vmap"


def measure(names: list[str], device: torch.device) -> dict:
    """{"gemm": GFLOP/s, workload: {"back_end", "flop", "us_per_sample", "gflops"}}, medians of alternated runs."""
    arms = {"gemm": (gemm_arm(device), None, 2 * GEMM_SIZE[device.type] ** 3, "")}
    for name in names:
        arms[name] = workload_arm(name, device)
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
    result = {"gemm": arms["gemm"][2] / statistics.median(seconds["gemm"]) / 1e9}
    for name in names:
        _, samples, flop, back_end = arms[name]
        median = statistics.median(seconds[name])
        result[name] = {"back_end": back_end, "flop": flop, "us_per_sample": 1e6 * median / samples,
                        "gflops": flop * samples / median / 1e9}
    return result


def compare(names: list[str]) -> None:
    """This engine against --against's, in alternated processes."""
    arguments = [sys.executable, __file__, "--json", "--repeats", str(ARGS.repeats), "--threads", str(ARGS.threads),
                 "--device", ARGS.device, "--workloads", *names]
    runs = {"this": [], "against": []}
    for _ in range(ARGS.pairs):
        for engine, extra in (("this", []), ("against", ["--src", ARGS.against])):
            output = subprocess.run(arguments + extra, capture_output=True, text=True, check=True).stdout
            runs[engine].append(json.loads(output.splitlines()[-1]))
    print(f"torch {torch.__version__}, {ARGS.threads} thread(s), device {ARGS.device}; {ARGS.pairs} alternated "
          f"processes per engine, each the median of {ARGS.repeats} runs; this checkout against {ARGS.against}")
    print("| workload | engine | back end | µs/sample | GFLOP/s | of GEMM | time, against / this |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        ratios = [b[name]["us_per_sample"] / a[name]["us_per_sample"] for a, b in zip(runs["this"], runs["against"])]
        for engine, results in runs.items():
            cell = lambda key: statistics.median(r[name][key] for r in results)  # noqa: E731
            share = statistics.median(r[name]["gflops"] / r["gemm"] for r in results)
            ratio = f"{statistics.median(ratios):.2f}" if engine == "this" else ""
            print(f"| {name} | {engine} | {results[0][name]['back_end']} | {cell('us_per_sample'):.1f} | "
                  f"{cell('gflops'):.1f} | {100 * share:.0f}% | {ratio} |")
    print(f"GEMM rate, median of each engine's processes: this {statistics.median(r['gemm'] for r in runs['this']):.1f}"
          f", against {statistics.median(r['gemm'] for r in runs['against']):.1f} GFLOP/s")


def main():
    ensure_malloc_settings([sys.executable, *sys.argv])  # the train rule's allocator settings
    torch.set_num_threads(ARGS.threads)
    names = ARGS.workloads or list(WORKLOADS)
    if ARGS.against:
        compare(names)
        return
    device = torch.device(ARGS.device)
    result = measure(names, device)
    if ARGS.json:
        print(json.dumps(result))
        return
    print(f"torch {torch.__version__}, {ARGS.threads} thread(s), device {device}, fedavail from "
          f"{ARGS.src or 'the installed package'}; medians of {ARGS.repeats} alternated runs")
    print(f"GEMM {GEMM_SIZE[device.type]}^3 float32: {result['gemm']:.1f} GFLOP/s")
    print("| workload | back end | MFLOP/sample | µs/sample | GFLOP/s | of GEMM |")
    print("|---|---|---|---|---|---|")
    for name in names:
        r = result[name]
        print(f"| {name} | {r['back_end']} | {r['flop'] / 1e6:.2f} | {r['us_per_sample']:.1f} | {r['gflops']:.1f} | "
              f"{100 * r['gflops'] / result['gemm']:.0f}% |")


if __name__ == "__main__":
    main()
