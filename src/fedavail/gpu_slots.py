"""Lock-file GPU slots: each concurrent training job on a several-GPU workstation gets its own device (README).

Snakemake's `gpu` resource (profiles/local-gpu) only caps how many training jobs run at once; it assigns no device,
so every job would land on GPU 0. An `fcntl.flock` lock per (host, device, level) slot file is released by the kernel
however the process exits, so a crashed job never leaves a slot taken. This module must not import torch: CUDA reads
CUDA_VISIBLE_DEVICES once, when it initialises."""

import fcntl
import itertools
import logging
import os
import re
import socket
import subprocess
from collections import namedtuple
from pathlib import Path

log = logging.getLogger("fedavail.gpu_slots")

MAX_LEVELS = 64
_HIDDEN = ("", "-1", "none", "NoDevFiles")
Slot = namedtuple("Slot", "device level path handle")  # handle: the open, locked slot file
_held: list[Slot] = []  # slots claimed by this process: kept referenced (and locked) until it exits


def visible_devices() -> list[str]:
    """The devices this process may use: CUDA_VISIBLE_DEVICES when set (a scheduler or the user chose), else every
    GPU (or MIG instance) that `nvidia-smi -L` lists; [] without NVIDIA GPUs."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is not None:
        return [] if value.strip() in _HIDDEN else [d.strip() for d in value.split(",") if d.strip()]
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):  # no nvidia-smi, a hang, or a failure: no NVIDIA GPUs to use
        return []
    devices, gpu_index = [], -1
    for line in listing.splitlines():
        if line.startswith("GPU "):
            gpu_index += 1
            devices.append(str(gpu_index))
        elif "MIG" in line and (uuid := re.search(r"UUID:\s*(MIG-[^)\s]+)", line)):
            # A MIG-enabled GPU is used through its instances, addressed by UUID.
            if devices and devices[-1] == str(gpu_index):
                devices.pop()
            devices.append(uuid.group(1))
    return devices


def gpu_count() -> int:
    """How many devices jobs can be spread over (FEDAVAIL_GPUS overrides detection); profiles/local-gpu uses it."""
    override = os.environ.get("FEDAVAIL_GPUS")
    return int(override) if override else len(visible_devices())


def claim(slot_dir: str | os.PathLike, requested_device: str = "auto") -> Slot | None:
    """Give this process one device via CUDA_VISIBLE_DEVICES (call before torch touches CUDA): lock the first free
    slot, devices in order on level 0 (one job per device), then level 1 (a second job on a device: never a wait), and
    so on. None for a fixed device (`cpu`, `cuda:N`) or at most one visible (e.g. the one GPU SLURM gave the job)."""
    if requested_device not in ("auto", "cuda"):
        return None
    devices = visible_devices()
    if len(devices) < 2:
        return None
    slot_dir = Path(slot_dir)
    slot_dir.mkdir(parents=True, exist_ok=True)
    host = _safe(socket.gethostname())
    for level, device in itertools.product(range(MAX_LEVELS), devices):
        path = slot_dir / f"{host}.gpu-{_safe(device)}.{level}.lock"
        handle = open(path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        handle.truncate(0)
        print(os.getpid(), file=handle, flush=True)
        _held.append(Slot(device, level, path, handle))
        os.environ["CUDA_VISIBLE_DEVICES"] = device
        log.info("GPU slot: CUDA_VISIBLE_DEVICES=%s (%s of %s; %s)", device,
                 "sole user" if level == 0 else f"sharing, level {level}", ",".join(devices), path)
        return _held[-1]
    raise RuntimeError(f"all {MAX_LEVELS} levels of {len(devices)} GPU slots under {slot_dir} are taken")


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)
