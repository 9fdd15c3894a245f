"""Step cost: what one sample of a client step costs at the configs' batch sizes, against the same model's floor.

    python benchmarks/step_cost.py [--repeats 5] [--threads 1] [--device cpu|cuda] [--workloads NAME ...]

For every model the configs train, at the batch size and the participants per round they use, it times a round of
local SGD (10 steps per participant) through the engine on both back ends, the per-client loop and vmap over the
participants, and one client's steps at batch 512 on the loop (the per-sample floor: per-call costs spread over many
samples, the same kernels). Printed per workload: microseconds per sample of each back end and of the floor, each back end's
ratio to the floor, the faster back end, and the one the engine picks for `execution.batched: auto`
(fedavail.engine.backend). Arms alternate run by run after one warm-up each; medians of --repeats runs."""

import argparse
import statistics
import sys

import numpy as np
import torch

from peers import alternated

from fedavail.data.prepared import channel_stats
from fedavail.engine.backend import picks_vmap
from fedavail.engine.client_data import ClientData
from fedavail.engine.local import ClientTrainer, vmap_supported
from fedavail.engine.params import FlatModel
from fedavail.launcher import ensure_malloc_settings
from fedavail.models import build_model
from fedavail.plan.experiments import AugmentationOptions
from fedavail.plan.local import LocalOptions

SEED, LR, STEPS, FLOOR_BATCH, CLIENTS = 0, 0.05, 10, 512, 100
# (model, channels, image size, classes, batch size, participants per round): what config/*.yaml train.
WORKLOADS = {
    "small_cnn@16x10": ("small_cnn", 1, 28, 10, 16, 10),  # config/config.yaml, claims.yaml (mnist5k)
    "small_cnn@16x30": ("small_cnn", 1, 28, 10, 16, 30),  # the same under FedSWE availability at p ~ 0.3
    "small_cnn@16x3": ("small_cnn", 1, 28, 10, 16, 3),  # a round with few participants
    # A batch job of the default run (execution.seeds_per_job: all): ~10 runs' participants in one back-end call.
    "small_cnn@16x100": ("small_cnn", 1, 28, 10, 16, 100),
    "small_cnn@32x10": ("small_cnn", 1, 28, 10, 32, 10),  # where vmap stops winning (the engine's table)
    "small_cnn@64x10": ("small_cnn", 1, 28, 10, 64, 10),
    "fast_cnn_fmnist@128x10": ("fast_cnn_fmnist", 1, 28, 62, 128, 10),  # config/fast.yaml
    "fast_cnn_cifar10@128x10": ("fast_cnn_cifar10", 3, 32, 10, 128, 10),  # config/fast.yaml
    "fedswe_svhn_cnn@128x10": ("fedswe_svhn_cnn", 3, 32, 10, 128, 10),  # config/fedswe.yaml
    "fedswe_svhn_cnn@32x50": ("fedswe_svhn_cnn", 3, 32, 10, 32, 50),  # the peer benchmark's second workload
}


def image_dataset(channels: int, size: int, classes: int, samples: int) -> dict:
    generator = torch.Generator().manual_seed(SEED)
    x = torch.randint(0, 256, (samples, channels, size, size), dtype=torch.uint8, generator=generator)
    y = torch.randint(0, classes, (samples,), generator=generator)
    mean, std = channel_stats(x[:2000])
    return {"name": "synthetic", "kind": "image", "num_classes": classes, "train_x": x, "train_y": y,
            "test_x": x[:10], "test_y": y[:10], "mean": mean, "std": std, "meta": {}}


def engine_arm(model_name: str, dataset: dict, data: ClientData, participants: int, batch: int, batched: bool,
               device: torch.device):
    def setup():
        model = FlatModel(build_model(model_name, dataset, SEED).to(device))
        starts = model.flatten().expand(participants, -1)
        trainer = ClientTrainer(model, data, LocalOptions(lr=LR, steps=STEPS, batch_size=batch), SEED, batched)
        state = trainer.init_state(CLIENTS, starts.dtype, device)
        clients = torch.arange(participants, device=device)
        return lambda: trainer.train(clients, starts, None, 0, LR, state).end
    return setup


def main():
    ensure_malloc_settings([sys.executable, *sys.argv])  # the train rule's allocator settings
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--workloads", nargs="+", choices=sorted(WORKLOADS), default=list(WORKLOADS))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, {args.threads} threads, device {device}, {STEPS} steps per participant, "
          f"floor at batch {FLOOR_BATCH}, medians of {args.repeats} alternated runs")
    print("| workload | loop µs/sample | vmap µs/sample | floor µs/sample | loop / floor | vmap / floor | faster | "
          "engine picks |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.workloads:
        model_name, channels, size, classes, batch, participants = WORKLOADS[name]
        dataset = image_dataset(channels, size, classes, CLIENTS * max(batch, FLOOR_BATCH))
        offsets = np.linspace(0, len(dataset["train_y"]), CLIENTS + 1).astype(np.int64)
        data = ClientData(dataset, offsets, np.arange(len(dataset["train_y"])), device, AugmentationOptions())
        arms = {"loop": engine_arm(model_name, dataset, data, participants, batch, False, device),
                "floor": engine_arm(model_name, dataset, data, 1, FLOOR_BATCH, False, device)}
        if vmap_supported(FlatModel(build_model(model_name, dataset, SEED))):
            arms["vmap"] = engine_arm(model_name, dataset, data, participants, batch, True, device)
        seconds, _ = alternated(arms, args.repeats, device)
        median = {arm: statistics.median(times) for arm, times in seconds.items()}
        per_sample = {arm: 1e6 * seconds / (STEPS * (FLOOR_BATCH if arm == "floor" else batch * participants))
                      for arm, seconds in median.items()}
        floor = per_sample["floor"]
        vmap = per_sample.get("vmap", float("nan"))
        faster = "vmap" if vmap < per_sample["loop"] else "loop"
        picked = "vmap" if picks_vmap(model_name, batch, device) else "loop"
        print(f"| {name} | {per_sample['loop']:.1f} | {vmap:.1f} | {floor:.1f} | {per_sample['loop'] / floor:.2f} | "
              f"{vmap / floor:.2f} | {faster} | {picked} |")


if __name__ == "__main__":
    main()
