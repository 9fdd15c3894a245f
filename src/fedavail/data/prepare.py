"""Turn each dataset's raw files into the prepared dict of fedavail.data.prepared (the CLI then saves it). Images
become uint8 NCHW tensors decoded once here, so training never decodes or transforms samples in Python."""

import gzip
import io
import pickle
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import scipy.io
import torch
from PIL import Image

from fedavail.data import bundled, download, leaf
from fedavail.data import shakespeare as shk
from fedavail.data.download import DatasetError, provenance, unreadable_as_error
from fedavail.data.prepared import image_dataset

_IDX_UBYTE_IMAGES, _IDX_UBYTE_LABELS = 0x00000803, 0x00000801
_CIFAR_FOLDER = "cifar-10-batches-py"
_CIFAR_TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                         "Ankle boot")
SVHN_CLASSES = tuple(str(d) for d in range(10))
_REDOWNLOAD = "; remove it and download it again"


def read_idx_gz(path: Path, magic: int) -> np.ndarray:
    """An idx-ubyte array (big-endian header: magic, then one uint32 per dimension) from a .gz file."""
    with unreadable_as_error(path, "gzip file", (OSError, EOFError), _REDOWNLOAD), gzip.open(path, "rb") as f:
        data = f.read()
    ndim = magic & 0xFF
    header = np.frombuffer(data, dtype=">u4", count=1 + ndim) if len(data) >= 4 * (1 + ndim) else None
    if header is None or int(header[0]) != magic:
        found = "too short" if header is None else f"magic {int(header[0]):#010x}"
        raise DatasetError(f"{path} is not an idx-ubyte file with magic {magic:#010x} ({found})")
    shape = tuple(int(d) for d in header[1:])
    body = np.frombuffer(data, dtype=np.uint8, offset=4 * (1 + ndim))
    if body.size != int(np.prod(shape)):
        raise DatasetError(f"{path}: header says shape {shape} but holds {body.size} values (truncated file?)")
    return body.reshape(shape)


def _fashion_mnist(paths: list[Path]) -> tuple:
    """Fashion-MNIST: gzip-compressed idx-ubyte files (train images, train labels, test images, test labels)."""

    def split(images_path: Path, labels_path: Path):
        images, labels = read_idx_gz(images_path, _IDX_UBYTE_IMAGES), read_idx_gz(labels_path, _IDX_UBYTE_LABELS)
        if len(images) != len(labels):
            raise DatasetError(f"{labels_path}: {len(labels)} labels but {images_path.name} holds {len(images)} images")
        return torch.from_numpy(images.copy()).unsqueeze(1), torch.from_numpy(labels.astype(np.int64))

    return split(*paths[:2]), split(*paths[2:]), FASHION_MNIST_CLASSES


def _cifar10(paths: list[Path]) -> tuple:
    """CIFAR-10: python pickle batches inside the tar.gz."""
    (archive,) = paths
    wanted = {f"{_CIFAR_FOLDER}/{b}" for b in (*_CIFAR_TRAIN_BATCHES, "test_batch", "batches.meta")}
    batches = {}
    errors = (tarfile.TarError, OSError, EOFError, pickle.UnpicklingError)
    with unreadable_as_error(archive, "CIFAR-10 archive", errors), tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            if member.name in wanted:
                # The archive's own format is pickle: prepare() has verified its checksum before this.
                batches[member.name.split("/")[-1]] = pickle.load(tar.extractfile(member), encoding="bytes")
    if missing := sorted(wanted - {f"{_CIFAR_FOLDER}/{b}" for b in batches}):
        raise DatasetError(f"{archive} lacks {', '.join(missing)}")

    def split(names):
        images = np.concatenate([np.asarray(batches[n][b"data"], dtype=np.uint8) for n in names])
        labels = np.concatenate([np.asarray(batches[n][b"labels"], dtype=np.int64) for n in names])
        return torch.from_numpy(images.reshape(-1, 3, 32, 32)), torch.from_numpy(labels)

    classes = [c.decode() for c in batches["batches.meta"][b"label_names"]]
    return split(_CIFAR_TRAIN_BATCHES), split(("test_batch",)), classes


def _svhn(paths: list[Path]) -> tuple:
    """SVHN: one MATLAB file per split, X [32, 32, 3, N] and y [N, 1] with the digit 0 labelled 10."""

    def split(path: Path):
        errors = (ValueError, OSError, TypeError, scipy.io.matlab.MatReadError)
        with unreadable_as_error(path, "SVHN .mat file", errors):
            mat = scipy.io.loadmat(path)
        if "X" not in mat or "y" not in mat or mat["X"].shape[:3] != (32, 32, 3):
            raise DatasetError(f"{path} lacks X [32, 32, 3, N] and y [N, 1]")
        images = np.ascontiguousarray(mat["X"].astype(np.uint8).transpose(3, 2, 0, 1))
        labels = mat["y"].reshape(-1).astype(np.int64) % 10  # SVHN writes the digit 0 as class 10
        return torch.from_numpy(images), torch.from_numpy(labels)

    return split(paths[0]), split(paths[1]), SVHN_CLASSES


def _cinic10(paths: list[Path]) -> tuple:
    """CINIC-10: an ImageFolder tree of 32x32 PNGs (train/valid/test/<class>/<file>.png) in a tar.gz."""
    (archive,) = paths
    found = {"train": [], "test": []}  # folder ("valid" is not used) -> [(class, filename, image)]
    # Stream the members in archive order: random access into a gzip stream would decompress it again each time.
    errors = (tarfile.TarError, OSError, EOFError)
    with unreadable_as_error(archive, "CINIC-10 archive", errors), tarfile.open(archive, "r|gz") as tar:
        for member in tar:
            parts = [p for p in Path(member.name).parts if p not in (".", "")]
            if not member.isfile() or not member.name.endswith(".png") or len(parts) < 3:
                continue
            split, label, filename = parts[-3:]
            if split in found:
                with Image.open(io.BytesIO(tar.extractfile(member).read())) as image:
                    pixels = np.asarray(image.convert("RGB"))  # a few CINIC-10 images are greyscale
                if pixels.shape != (32, 32, 3):
                    raise DatasetError(f"{archive}: {member.name} is {pixels.shape[1::-1]}, expected 32x32")
                found[split].append((label, filename, pixels))
    classes = sorted({label for samples in found.values() for label, _, _ in samples})
    for split, samples in found.items():
        if (split_classes := sorted({label for label, _, _ in samples})) != classes:
            raise DatasetError(f"{archive}: {split}/ has classes {split_classes}, expected {classes}")
    class_index = {c: i for i, c in enumerate(classes)}

    def split(folder: str):
        # ImageFolder order: classes sorted by folder name, files sorted by name within a class.
        samples = sorted(found[folder], key=lambda s: (class_index[s[0]], s[1]))
        images = np.stack([pixels for _, _, pixels in samples]).transpose(0, 3, 1, 2)
        labels = np.array([class_index[label] for label, _, _ in samples], dtype=np.int64)
        return torch.from_numpy(np.ascontiguousarray(images)), torch.from_numpy(labels)

    return split("train"), split("test"), classes


def _shakespeare_leaf(paths: list[Path], options: dict) -> dict:
    """Shakespeare built the LEAF way from the 1994 Gutenberg complete works in a zip."""
    (archive,) = paths
    errors = (zipfile.BadZipFile, OSError, EOFError)
    with unreadable_as_error(archive, "zip file", errors, _REDOWNLOAD), zipfile.ZipFile(archive) as zf:
        texts = [n for n in zf.namelist() if n.lower().endswith(".txt")]
        if len(texts) != 1:
            raise DatasetError(f"{archive} should hold one .txt file (100.txt), found {texts}")
        text = zf.read(texts[0]).decode("utf-8", errors="replace")
    meta = provenance(f"Project Gutenberg complete works ({archive.name}: {texts[0]}), LEAF construction", [archive])
    return shk.build_text_dataset("shakespeare_leaf", shk.parse_complete_works(text), options, meta)


# Each image dataset's reader of its verified raw files ((train, test, class names)) and the provenance's source.
_IMAGE_READERS = {
    "fashion_mnist": (_fashion_mnist, "Fashion-MNIST idx-ubyte files"),
    "cifar10": (_cifar10, "CIFAR-10 python version"),
    "svhn": (_svhn, "SVHN cropped digits (format 2)"),
    "cinic10": (_cinic10, "CINIC-10 (train split for training, test split for testing)"),
}
_BUNDLED_PREPARERS = {"mnist5k": lambda _: bundled.mnist5k(), "digits": lambda _: bundled.digits(),
                      "shakespeare": bundled.shakespeare}
RAW_DATASETS = (*_IMAGE_READERS, "shakespeare_leaf", leaf.NAME)
BUNDLED_DATASETS = tuple(_BUNDLED_PREPARERS)


def prepare(name: str, raw_dir: Path | None, options: dict, checksums: dict[str, str] | None = None) -> dict:
    """The prepared dict of dataset `name`. Raw datasets read their files from raw_dir (bundled ones ignore it), checked
    against their published checksums before anything reads them (`checksums` {filename: md5} overrides them, for
    miniature test files). Only the Gutenberg-built Shakespeare datasets take options (shk.build_text_dataset)."""
    options = dict(options or {})
    if name in _BUNDLED_PREPARERS:
        return _BUNDLED_PREPARERS[name](options)
    if name not in RAW_DATASETS:
        raise DatasetError(f"unknown dataset {name!r}; known: {sorted(RAW_DATASETS + BUNDLED_DATASETS)}")
    if raw_dir is None:
        raise DatasetError(f"dataset {name!r} needs raw_dir, the folder holding its downloaded files")
    if name == leaf.NAME:  # LEAF's JSON files have no published checksums; leaf.py checks their form
        return leaf.prepare(Path(raw_dir), options)
    paths = download.verify(name, Path(raw_dir), checksums)
    if name == "shakespeare_leaf":
        return _shakespeare_leaf(paths, options)
    read, source = _IMAGE_READERS[name]
    train, test, classes = read(paths)
    return image_dataset(name, len(classes), train, test, provenance(source, paths), classes=list(classes))
