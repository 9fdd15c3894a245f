"""Small synthetic inputs for unit tests (the default run and the workflow tests use real bundled data)."""

import numpy as np
import torch

from fedavail.data.prepared import channel_stats


def image_dataset(train: int = 400, test: int = 100, size: int = 8, channels: int = 1, seed: int = 0) -> dict:
    """Class-dependent blobs: learnable, so accuracy rises above chance within a few rounds."""
    rng = np.random.default_rng(seed)

    def split(n):
        labels = rng.integers(0, 10, n)
        base = rng.normal(0, 30, (n, channels, size, size)) + 100
        rows = labels % size
        base[np.arange(n), :, rows, :] += 120
        base[np.arange(n), :, :, (labels // 2) % size] += 60
        return torch.from_numpy(np.clip(base, 0, 255).astype(np.uint8)), torch.from_numpy(labels.astype(np.int64))

    train_x, train_y = split(train)
    test_x, test_y = split(test)
    mean, std = channel_stats(train_x)
    return {"name": "blobs", "kind": "image", "num_classes": 10, "train_x": train_x, "train_y": train_y,
            "test_x": test_x, "test_y": test_y, "mean": mean, "std": std, "meta": {"source": "synthetic"}}


def training_inputs(root) -> None:
    """data.pt, partition.npz (10 clients, Dirichlet 0.5) and trace.npz (FedSWE sine, 200 rounds) in `root`: the
    files one training run reads."""
    from fedavail.availability.traces import make_trace, save_trace
    from fedavail.data.prepared import save_prepared
    from fedavail.partitions.partition import make_partition, save_partition

    dataset = image_dataset()
    save_prepared(root / "data.pt", dataset)
    partition = make_partition(dataset["train_y"].numpy(), 10,
                               {"scheme": "client_dirichlet", "num_clients": 10, "alpha": 0.5}, seed=0)
    save_partition(root / "partition.npz", partition)
    save_trace(root / "trace.npz", make_trace({"model": "fedswe", "dynamics": "sine"}, 10, 200, seed=0,
                                              partition=partition))
