"""Peer benchmark: one FedAvg round of fedavail against FedLab 1.3.0 and a plain PyTorch loop.

    python benchmarks/peers.py [--repeats 7] [--device cpu|cuda] [--threads N] [--arms ...]

The FedSWE SVHN CNN on SVHN-shaped data held in memory, two workloads: 10 participants x 10 steps x batch 128 and
50 participants x 10 steps x batch 32. Every arm runs the same round on the same minibatches (fedavail's keyed
streams, drawn once): local SGD (lr 0.05, no gradient clipping: FedLab's trainer has none) from the global model for
each participant, then the mean of the participants' models.
- fedavail: the engine's per-client loop (FlatModel, channels-last kernels; uint8 images normalised on the fly).
- fedavail-contiguous: the same with contiguous kernels (the channels-last decision; see FlatModel).
- fedlab: FedLab 1.3.0's SGDSerialClientTrainer (`pip install -e '.[bench]'`, see benchmarks/README.md) over the
  prepared float minibatches, aggregated with its Aggregators.fedavg_aggregate.
- plain-loop: what a user writes without FL machinery: one nn.Module, torch.optim.SGD, the prepared minibatches.
Arms alternate run by run (A B C D A B C D ...), each run with a fresh model, after one untimed warm-up run each, so
a shared machine's load drifts over all arms alike. Printed: min and median seconds per round, every arm's median
against fedavail's, and each arm's largest difference from the plain loop's new global model (same minibatches: only
float rounding). Targets on CPU: FedLab / fedavail >= 1.25 on both workloads."""

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from fedavail.data.prepared import channel_stats
from fedavail.engine.client_data import ClientData
from fedavail.engine.local import ClientTrainer
from fedavail.engine.params import FlatModel
from fedavail.launcher import ensure_malloc_settings
from fedavail.models import build_model
from fedavail.plan.experiments import AugmentationOptions
from fedavail.plan.local import LocalOptions

SEED = 0
LR = 0.05
STEPS = 10
TRAIN_SAMPLES = 20_000
NUM_CLIENTS = 100
WORKLOADS = ((10, 128), (50, 32))  # (participants, batch size)
ARMS = ("fedavail", "fedavail-contiguous", "fedlab", "plain-loop")


def fedavail_round(model: FlatModel, data: ClientData, clients: torch.Tensor, global_weights: torch.Tensor,
                   batch_size: int, grad_clip: float | None, batched: bool) -> torch.Tensor:
    """One FedAvg round through fedavail's engine: local SGD for `clients` from `global_weights`, then the mean of
    their end points. The benchmarks' only call into the engine."""
    starts = global_weights.expand(len(clients), -1)
    options = LocalOptions(lr=LR, steps=STEPS, batch_size=batch_size, grad_clip=grad_clip)
    trainer = ClientTrainer(model, data, options, SEED, batched)
    state = trainer.init_state(NUM_CLIENTS, starts.dtype, starts.device)
    return trainer.train(clients, starts, None, 0, LR, state).end.mean(0)


def benchmark_setup(threads: int, device_name: str):
    """Threads, device, the SVHN-shaped dataset and its clients, as every benchmark here starts."""
    torch.set_num_threads(threads)
    device = torch.device(device_name)
    dataset = svhn_like()
    print(f"torch {torch.__version__}, {threads} threads, device {device}")
    return device, dataset, client_data(dataset, device)


def parse_workloads(workloads: list[str]) -> list[tuple[int, int]]:
    """PARTICIPANTSxBATCH strings as (participants, batch size)."""
    return [tuple(int(n) for n in workload.split("x")) for workload in workloads]


def svhn_like() -> dict:
    """A prepared dataset shaped like SVHN (uint8 3x32x32 images, 10 classes), random pixels and labels."""
    generator = torch.Generator().manual_seed(SEED)
    x = torch.randint(0, 256, (TRAIN_SAMPLES, 3, 32, 32), dtype=torch.uint8, generator=generator)
    y = torch.randint(0, 10, (TRAIN_SAMPLES,), generator=generator)
    mean, std = channel_stats(x[:2000])
    return {"name": "svhn_like", "kind": "image", "num_classes": 10, "train_x": x, "train_y": y,
            "test_x": x[:10], "test_y": y[:10], "mean": mean, "std": std, "meta": {}}


def client_data(dataset: dict, device: torch.device) -> ClientData:
    offsets = np.linspace(0, TRAIN_SAMPLES, NUM_CLIENTS + 1).astype(np.int64)
    return ClientData(dataset, offsets, np.arange(TRAIN_SAMPLES), device, AugmentationOptions())


def fresh_module(dataset: dict, device: torch.device) -> torch.nn.Module:
    return build_model("fedswe_svhn_cnn", dataset, SEED).to(device)


def prepared_batches(data: ClientData, clients: torch.Tensor, batch_size: int) -> dict[int, list]:
    """Each participant's minibatches of the round as model inputs, drawn from fedavail's keyed streams."""
    return {c: list(data.client_stream(SEED, 0, c, STEPS, batch_size)) for c in clients.tolist()}


def plain_loop_round(module: torch.nn.Module, batches: dict[int, list], global_weights: torch.Tensor,
                     grad_clip: float | None) -> torch.Tensor:
    optimizer = torch.optim.SGD(module.parameters(), lr=LR)
    module.train()
    ends = []
    for client_batches in batches.values():
        # A copy: vector_to_parameters makes the parameters views of the vector it is given.
        torch.nn.utils.vector_to_parameters(global_weights.clone(), module.parameters())
        for x, y in client_batches:
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(module(x), y).backward()
            if grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(module.parameters(), grad_clip)
            optimizer.step()
        ends.append(torch.nn.utils.parameters_to_vector(module.parameters()))
    return torch.stack(ends).mean(0)


class PreparedFedDataset:
    """FedLab's dataset interface (`get_dataloader(id, batch_size)`) over the round's prepared minibatches."""

    def __init__(self, batches: dict[int, list]):
        self.batches = batches

    def get_dataloader(self, client: int, batch_size: int) -> list:
        return self.batches[client]


def fedlab_arm(dataset: dict, device: torch.device, batches: dict[int, list], batch_size: int):
    from fedlab.contrib.algorithm.basic_client import SGDSerialClientTrainer
    from fedlab.utils.aggregator import Aggregators

    def setup():
        cuda = device.type == "cuda"
        index = (device.index if device.index is not None else torch.cuda.current_device()) if cuda else None
        trainer = SGDSerialClientTrainer(fresh_module(dataset, device), NUM_CLIENTS, cuda=cuda,
                                         device=f"cuda:{index}" if cuda else None)
        trainer.setup_dataset(PreparedFedDataset(batches))
        trainer.setup_optim(epochs=1, batch_size=batch_size, lr=LR)
        payload = [trainer.model_parameters]

        def run():
            trainer.local_process(payload, list(batches))
            return Aggregators.fedavg_aggregate([package[0] for package in trainer.uplink_package])
        return run
    return setup


def logical_vector(model: FlatModel, vector: torch.Tensor) -> torch.Tensor:
    """A FlatModel vector in the module's own parameter order (as parameters_to_vector lays it out)."""
    return torch.cat([t.reshape(-1) for t in model.unflatten(vector).values()])


def fedavail_arm(dataset: dict, device: torch.device, data: ClientData, clients: torch.Tensor, batch_size: int,
                 channels_last: bool, grad_clip: float | None = None, batched: bool = False):
    def setup():
        model = FlatModel(fresh_module(dataset, device), channels_last=channels_last)
        global_weights = model.flatten()

        def run():
            return logical_vector(model, fedavail_round(model, data, clients, global_weights, batch_size, grad_clip,
                                                        batched))
        return run
    return setup


def plain_loop_arm(dataset: dict, device: torch.device, batches: dict[int, list], grad_clip: float | None = None):
    def setup():
        module = fresh_module(dataset, device)
        global_weights = torch.nn.utils.parameters_to_vector(module.parameters()).detach().clone()
        return lambda: plain_loop_round(module, batches, global_weights, grad_clip)
    return setup


def workload_arm(name: str, dataset: dict, device: torch.device, data: ClientData, clients: torch.Tensor,
                 batches: dict[int, list], batch_size: int):
    if name == "fedlab":
        return fedlab_arm(dataset, device, batches, batch_size)
    if name == "plain-loop":
        return plain_loop_arm(dataset, device, batches)
    return fedavail_arm(dataset, device, data, clients, batch_size, channels_last=name == "fedavail")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def alternated(arms: dict[str, Callable], repeats: int, device: torch.device) -> tuple[dict, dict]:
    """Time `repeats` runs of every arm, alternating A B C A B C ... after one untimed warm-up run of each.

    An arm is a setup function returning the timed callable (a fresh model each run), which returns the round's new
    global model. Returns (seconds per arm, last new global model per arm)."""
    seconds = {name: [] for name in arms}
    results = {}
    for repeat in range(repeats + 1):
        for name, setup in arms.items():
            run = setup()
            synchronize(device)
            started = time.perf_counter()
            results[name] = run()
            synchronize(device)
            if repeat > 0:
                seconds[name].append(time.perf_counter() - started)
    return seconds, results


def print_table(title: str, seconds: dict, results: dict, reference: str, baseline: str | None) -> None:
    print(title)
    print(f"  {'arm':22s} {'min s':>8s} {'median s':>9s} {'median / ' + reference:>22s}"
          + (f" {'max |Δ| vs ' + baseline:>22s}" if baseline else ""))
    ours = statistics.median(seconds[reference])
    for name, times in seconds.items():
        median = statistics.median(times)
        line = f"  {name:22s} {min(times):8.3f} {median:9.3f} {median / ours:22.3f}"
        if baseline:
            line += f" {(results[name].float() - results[baseline].float()).abs().max().item():22.2e}"
        print(line)


def main():
    # The same malloc settings as the train rule gives training jobs, so rounds are timed as the pipeline runs them.
    ensure_malloc_settings([sys.executable, *sys.argv])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7, help="timed runs of each arm (after one warm-up run)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--workloads", nargs="+", default=[f"{p}x{b}" for p, b in WORKLOADS],
                        help="PARTICIPANTSxBATCH, e.g. 10x128")
    args = parser.parse_args()
    if "fedlab" in args.arms:
        try:
            import fedlab  # noqa: F401
        except ImportError:
            parser.error("the fedlab arm needs FedLab 1.3.0: pip install -e '.[bench]' (benchmarks/README.md), "
                         "or leave it out with --arms")
    device, dataset, data = benchmark_setup(args.threads, args.device)
    for participants, batch_size in parse_workloads(args.workloads):
        clients = torch.arange(participants)
        batches = prepared_batches(data, clients, batch_size)
        arms = {name: workload_arm(name, dataset, device, data, clients, batches, batch_size) for name in args.arms}
        seconds, results = alternated(arms, args.repeats, device)
        reference = args.arms[0]
        print_table(f"{participants} participants x {STEPS} steps x batch {batch_size}, {args.repeats} alternated "
                    f"runs per arm:", seconds, results, reference,
                    "plain-loop" if "plain-loop" in args.arms else None)
        if "fedavail" in seconds and "fedlab" in seconds:
            ratio = statistics.median(seconds["fedlab"]) / statistics.median(seconds["fedavail"])
            print(f"  FedLab / fedavail (medians): {ratio:.2f}x (target >= 1.25x)")


if __name__ == "__main__":
    main()
