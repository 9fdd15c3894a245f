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
