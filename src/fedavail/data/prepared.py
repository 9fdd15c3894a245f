"""The one on-disk format every dataset is prepared into, and its loader. Training reads only this: it never decodes
images or runs per-sample Python transforms. A prepared dataset is a torch file holding a dict of
  name, kind ("image" | "text"), num_classes,
  train_x / test_x: uint8 [N, C, H, W] images; for text, int64 [N] start positions of each sample's window in `text`,
  train_y / test_y: int64 [N] labels (next-token ids for text),
  text: uint8 [S] token stream and seq_length: int (text only: sample j's input is text[x_j : x_j + seq_length]),
  mean / std: float32 [C] per-channel normalisation of the train images in [0, 1] (images only),
  train_groups: int64 [N] natural client id per train sample (optional; Shakespeare roles), group_names: list[str],
  vocab: str (text only: the characters that token ids index),
  meta: dict of provenance (source, checksums, package version)."""

import io
from pathlib import Path

import numpy as np
import torch

from fedavail import __version__
from fedavail.io import UnreadableFileError, reading, write_bytes

REQUIRED_KEYS = ("name", "kind", "num_classes", "train_x", "train_y", "test_x", "test_y", "meta")
KIND_KEYS = {"image": ("mean", "std"), "text": ("text", "seq_length")}  # held besides REQUIRED_KEYS, per kind


class PreparedDataError(ValueError):
    pass


def validate(data: dict) -> dict:
    """The dataset itself when it has the format above; PreparedDataError naming what is wrong otherwise."""
    if missing := [k for k in REQUIRED_KEYS if k not in data]:
        raise PreparedDataError(f"prepared dataset {data.get('name', '?')!r} lacks keys {missing}")
    kind = data["kind"]
    if kind not in KIND_KEYS:
        raise PreparedDataError(f"unknown dataset kind {kind!r}")
    if missing := [k for k in KIND_KEYS[kind] if k not in data]:
        raise PreparedDataError(f"{kind} dataset lacks keys {missing}")
    if kind == "image" and (data["train_x"].dtype != torch.uint8 or data["train_x"].dim() != 4):
        raise PreparedDataError("image train_x must be uint8 [N, C, H, W]")
    for split in ("train", "test"):
        _check_split(data, split, kind)
    return data


def _check_split(data: dict, split: str, kind: str) -> None:
    x, y = data[f"{split}_x"], data[f"{split}_y"]
    if len(x) != len(y):
        raise PreparedDataError(f"{split}_x has {len(x)} samples but {split}_y has {len(y)}")
    if y.dtype != torch.int64:
        raise PreparedDataError(f"{split}_y must be int64, got {y.dtype}")
    if len(y) and (int(y.min()) < 0 or int(y.max()) >= data["num_classes"]):
        raise PreparedDataError(f"{split}_y has labels outside [0, {data['num_classes']})")
    if kind == "text" and (x.dtype != torch.int64 or x.dim() != 1):
        raise PreparedDataError(f"text {split}_x must be int64 [N] window starts")
    if kind == "text" and len(x) and (int(x.min()) < 0 or int(x.max()) + data["seq_length"] > len(data["text"])):
        raise PreparedDataError(f"text {split}_x has windows outside the token stream")


def text_windows(text: torch.Tensor, starts: torch.Tensor, seq_length: int) -> torch.Tensor:
    """int64 [N, seq_length] input windows of a text dataset, gathered from its token stream."""
    offsets = torch.arange(seq_length, device=starts.device)
    return text[starts[:, None] + offsets].long()


def channel_stats(images_uint8: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and std of uint8 NCHW images scaled to [0, 1]."""
    x = images_uint8.to(torch.float64) / 255.0
    return x.mean(dim=(0, 2, 3)).float(), x.std(dim=(0, 2, 3)).float()


def image_dataset(name: str, num_classes: int, train: tuple, test: tuple, meta: dict, **extra) -> dict:
    """The prepared dict of (uint8 images, int64 labels) train and test tensors; `extra` keys follow num_classes."""
    (train_x, train_y), (test_x, test_y) = train, test
    mean, std = channel_stats(train_x)
    return {"name": name, "kind": "image", "num_classes": num_classes, **extra, "train_x": train_x, "train_y": train_y,
            "test_x": test_x, "test_y": test_y, "mean": mean, "std": std, "meta": meta}


def text_dataset(name: str, vocab: str, seq_length: int, parts: dict, text: np.ndarray, group_names: list,
                 meta: dict) -> dict:
    """The prepared dict of a text dataset; parts: {"train_x", "train_y", ...: per-client numpy arrays}."""
    tensors = {key: torch.from_numpy(np.concatenate(values)) for key, values in parts.items()}
    return {"name": name, "kind": "text", "num_classes": len(vocab), "vocab": vocab, "seq_length": seq_length,
            **tensors, "text": torch.from_numpy(text), "group_names": group_names, "meta": meta}


def save_prepared(path: str | Path, data: dict) -> None:
    data = {**data, "meta": {**data.get("meta", {}), "fedavail_version": __version__}}
    validate(data)
    # Serialised in memory: torch.save to a file embeds that file's (temporary) name, so the bytes would differ on
    # every prepare and DVC could not deduplicate identical datasets.
    buffer = io.BytesIO()
    torch.save(data, buffer)
    write_bytes(path, buffer.getvalue())


def load_prepared(path: str | Path) -> dict:
    """The prepared dataset at `path`, read with weights_only=True: tensors, numbers, strings, lists and dicts only,
    so a file shared through DVC can never run code when loaded."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"prepared dataset {path} does not exist; run the prepare stage first")
    with reading(path, "prepared dataset"):  # truncated zips, foreign pickles (refused by weights_only) and the like
        data = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(data, dict):
        raise UnreadableFileError(path, "prepared dataset", f"holds a {type(data).__name__}, not a dict")
    try:
        return validate(data)
    except PreparedDataError as error:
        raise PreparedDataError(f"prepared dataset {path}: {error}") from error
