"""Seeded generators keyed by purpose: every random draw in fedavail comes from here, never from a global RNG."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch


def seed_sequence(seed: int, purpose: str, *keys: int) -> np.random.SeedSequence:
    # A stable integer for the purpose string (Python's hash() is salted per process).
    purpose_key = int.from_bytes(hashlib.sha256(purpose.encode()).digest()[:4], "little")
    return np.random.SeedSequence([int(seed), purpose_key, *(int(k) for k in keys)])


def numpy_generator(seed: int, purpose: str, *keys: int) -> np.random.Generator:
    """A numpy Generator for (seed, purpose, keys...), e.g. ("partition",) or ("trace",)."""
    return np.random.default_rng(seed_sequence(seed, purpose, *keys))


def torch_generator(seed: int, purpose: str, *keys: int, device: str | torch.device = "cpu") -> torch.Generator:
    """A torch Generator for (seed, purpose, keys...), e.g. ("minibatch", round, client)."""
    import torch  # here, not at the top: partition and trace jobs draw only from numpy and never load torch

    state = seed_sequence(seed, purpose, *keys).generate_state(2, dtype=np.uint32)
    return torch.Generator(device=device).manual_seed(int(state[0]) << 32 | int(state[1]))
