"""Writers of miniature raw dataset files in each real on-disk format, so tests run the real parsers offline."""

import gzip
import io
import pickle
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import scipy.io
from PIL import Image

from fedavail.data.download import file_digests

CIFAR_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def md5_of(*paths: Path) -> dict[str, str]:
    return {p.name: file_digests(p)["md5"] for p in paths}


def write_idx_gz(path: Path, array: np.ndarray) -> Path:
    magic = 0x0800 | array.ndim  # 0x08: unsigned byte
    header = np.array([magic, *array.shape], dtype=">u4").tobytes()
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())
    return path


def write_fashion_mnist(raw_dir: Path, rng: np.random.Generator, n_train: int = 12, n_test: int = 5) -> dict:
    """The four idx .gz files; returns the arrays written, keyed like the prepared dict."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for prefix, split, n in (("train", "train", n_train), ("t10k", "test", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        write_idx_gz(raw_dir / f"{prefix}-images-idx3-ubyte.gz", images)
        write_idx_gz(raw_dir / f"{prefix}-labels-idx1-ubyte.gz", labels)
        arrays[f"{split}_x"], arrays[f"{split}_y"] = images, labels
    return arrays


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def write_cifar10(raw_dir: Path, rng: np.random.Generator, per_batch: int = 4) -> dict:
    """cifar-10-python.tar.gz with five train batches, a test batch and batches.meta, as python pickles."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    arrays = {"train_x": [], "train_y": []}
    with tarfile.open(raw_dir / "cifar-10-python.tar.gz", "w:gz") as tar:
        for batch in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
            data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
            labels = [int(v) for v in rng.integers(0, 10, per_batch)]
            content = {b"batch_label": batch.encode(), b"labels": labels, b"data": data,
                       b"filenames": [f"{batch}_{i}.png".encode() for i in range(per_batch)]}
            _add_bytes(tar, f"cifar-10-batches-py/{batch}", pickle.dumps(content))
            split = "test" if batch == "test_batch" else "train"
            arrays.setdefault(f"{split}_x", []).append(data.reshape(-1, 3, 32, 32))
            arrays.setdefault(f"{split}_y", []).extend(labels)
        meta = {b"label_names": [c.encode() for c in CIFAR_CLASSES], b"num_vis": 3072}
        _add_bytes(tar, "cifar-10-batches-py/batches.meta", pickle.dumps(meta))
    return {k: np.concatenate(v) if k.endswith("_x") else np.array(v) for k, v in arrays.items()}


def write_svhn(raw_dir: Path, rng: np.random.Generator, n_train: int = 7, n_test: int = 4) -> dict:
    """train_32x32.mat / test_32x32.mat with X [32, 32, 3, N] and y [N, 1] in 1..10 (10 is the digit 0)."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for split, n in (("train", n_train), ("test", n_test)):
        x = rng.integers(0, 256, (32, 32, 3, n), dtype=np.uint8)
        y = np.concatenate([[10, 1], rng.integers(1, 11, n - 2)]).astype(np.uint8).reshape(n, 1)
        scipy.io.savemat(raw_dir / f"{split}_32x32.mat", {"X": x, "y": y})
        arrays[f"{split}_x"], arrays[f"{split}_y"] = x, y
    return arrays


def _png(pixels: np.ndarray, mode: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels, mode=mode).save(buffer, format="PNG")
    return buffer.getvalue()


def write_cinic10(raw_dir: Path, rng: np.random.Generator, classes=("cat", "airplane", "dog"), per_class: int = 2,
                  top: str = "") -> dict:
    """CINIC-10.tar.gz: <top>{train,valid,test}/<class>/<n>.png, members in a scrambled order, one greyscale PNG.

    Returns {split: [(class, filename, rgb pixels HWC)]} for train and test.
    """
    raw_dir.mkdir(parents=True, exist_ok=True)
    written, members = {"train": [], "test": []}, []
    for split in ("train", "valid", "test"):
        for label in classes:
            for i in range(per_class):
                filename = f"{split}-{label}-{i}.png"
                if split == "train" and label == classes[0] and i == 0:
                    grey = rng.integers(0, 256, (32, 32), dtype=np.uint8)
                    data, rgb = _png(grey, "L"), np.repeat(grey[:, :, None], 3, axis=2)
                else:
                    rgb = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
                    data = _png(rgb, "RGB")
                members.append((f"{top}{split}/{label}/{filename}", data))
                if split in written:
                    written[split].append((label, filename, rgb))
    with tarfile.open(raw_dir / "CINIC-10.tar.gz", "w:gz") as tar:
        _add_bytes(tar, f"{top}README.md", b"CINIC-10 miniature\n")
        for index in rng.permutation(len(members)):
            _add_bytes(tar, *members[index])
    return written


# A miniature of the 1994 Gutenberg complete works in LEAF's layout: sonnets first, plays with "  NAME. speech" lines
# and four-space continuations, the Comedy of Errors unindented, a copyright notice, and a poem at the end.
LONG_SPEECH = [f"Line {i} of a long speech that keeps the tester busy." for i in range(12)]
COMPLETE_WORKS = """\
The Complete Works

1609

THE SONNETS

by William Shakespeare

  1. From fairest creatures we desire increase,
  That thereby beauty's rose might never die,

1603

THE TRAGEDY OF TESTING

by William Shakespeare

Dramatis Personae

  ALPHA, a tester
  BETA, a reviewer

ACT I. SCENE 1.

  ALPHA. To test, or not to test: that is the question.
    Whether 'tis nobler in the mind to suffer
    The slings and arrows of outrageous failures.
{long_speech}
  BETA. Test.
  Alpha. And by a test to say we end the heart-ache.
  BETA. Ay, there's the rub.
                                                      Exit BETA
  BETA. Still here.
  BETA. Truly.

THE COMEDY OF ERRORS

by William Shakespeare

ACT I. SCENE 1.
DUKE. Proceed, Solinus.
AEGEON. Proceed, Solinus, to procure my fall,
And by the doom of death end woes and all.
<<THIS ELECTRONIC VERSION IS COPYRIGHT>>
DUKE. Merchant of Syracuse, plead no more.
DUKE. I am not partial.

A LOVER'S COMPLAINT

by William Shakespeare

  FROM off a hill. Whose concave womb reworded
""".format(long_speech="\n".join("    " + line for line in LONG_SPEECH))


def write_shakespeare_leaf(raw_dir: Path, text: str = COMPLETE_WORKS) -> Path:
    raw_dir.mkdir(parents=True, exist_ok=True)
    path = raw_dir / "1994-01-100.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("100.txt", text)
    return path


# A play in the layout of the `shakespeare` package's *_gut.txt files.
PLAY_TEXT = """\
THE TRAGEDY OF TESTING

by William Shakespeare



PERSONS REPRESENTED.

Alpha, a tester.
Beta, a reviewer.

A GHOST.
Of a failed build.

SCENE. A laboratory.



ACT I.

Scene I. The lab.

[Enter Alpha and Beta.]

Alp.
To test, or not to test:
that is   the question.

Bet.
Test.

Alp. [Aside.]
Whether 'tis nobler in the mind
[Draws.
Lines of direction.]
to suffer.

[Exit Beta.]

The slings and arrows.

ACT II.

Good night all.
Sleep well.

FIRST GHOST.
Boo.

Mar. and Ber.
Together.
"""
