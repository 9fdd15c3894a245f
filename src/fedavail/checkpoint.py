"""Training checkpoints: named groups of tensors and JSON metadata in a torch file read with weights_only=True (loading
one never runs code). One that fails a member's zip CRC (torch.load skips it) or its sha256 digest, or cannot be read,
is renamed to `<name>.unreadable` and the run starts over, so a damaged file never blocks a rerun."""

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from fedavail import integrity
from fedavail.io import atomic_path

log = logging.getLogger("fedavail.checkpoint")
FORMAT = 2


@dataclass
class Checkpoint:
    fingerprint: str
    tensors: dict[str, dict[str, torch.Tensor]]
    rows: list[dict]
    next_round: int
    elapsed: float
    threads: int
    batched: bool


def content_sha256(meta: str, groups: dict[str, dict[str, torch.Tensor]]) -> str:
    digest = hashlib.sha256(meta.encode())
    for group in sorted(groups):
        for name in sorted(groups[group]):
            tensor = groups[group][name].detach().cpu().contiguous()
            digest.update(f"{group}/{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
            digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def save_checkpoint(path: str | Path, *, fingerprint: str, tensors: dict[str, dict[str, torch.Tensor]],
                    rows: list[dict], next_round: int, elapsed: float, threads: int, batched: bool) -> None:
    meta = json.dumps({"format": FORMAT, "fingerprint": fingerprint, "rows": rows, "next_round": int(next_round),
                       "elapsed": float(elapsed), "threads": int(threads), "batched": bool(batched)})
    groups = {group: {name: t.detach().cpu() for name, t in named.items()} for group, named in tensors.items()}
    # Through a Python file object: torch's own file writer reports a full disk only as "unexpected pos", with no
    # errno, while a Python write raises the OSError that atomic_path turns into NoRoomError.
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        torch.save({"meta": meta, "tensors": groups, "sha256": content_sha256(meta, groups)}, f)


def set_aside(path: Path, reason: str) -> Path:
    return integrity.set_aside(path, ".unreadable", reason, "the run starts over")


def _read(path: Path) -> Checkpoint:
    if (damage := integrity.damage(path)) is not None:
        raise ValueError(damage)
    raw = torch.load(path, map_location="cpu", weights_only=True)
    meta = json.loads(raw["meta"])
    groups = raw["tensors"]
    if meta.get("format") != FORMAT or not all(
            isinstance(t, torch.Tensor) for named in groups.values() for t in named.values()):
        raise ValueError(f"not a fedavail checkpoint of format {FORMAT}")
    if raw.get("sha256") != content_sha256(raw["meta"], groups):
        raise ValueError("its content does not match its digest (edited or corrupted)")
    return Checkpoint(meta["fingerprint"], groups, meta["rows"], int(meta["next_round"]), float(meta["elapsed"]),
                      int(meta["threads"]), bool(meta["batched"]))


def load_checkpoint(path: str | Path, fingerprint: str, device: torch.device) -> Checkpoint | None:
    """The checkpoint at `path` if it exists, is readable and was made under `fingerprint`; else None."""
    checkpoint = integrity.read_or_set_aside(Path(path), _read, ".unreadable", "the run starts over")
    if checkpoint is None:
        return None
    if checkpoint.fingerprint != fingerprint:
        log.info("ignoring checkpoint %s: made from another spec, other inputs or other training code", path)
        return None
    checkpoint.tensors = {g: {k: v.to(device) for k, v in named.items()} for g, named in checkpoint.tensors.items()}
    return checkpoint
