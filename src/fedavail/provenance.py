"""What a training run was computed from: the content hashes of its input files (fedavail.train fingerprints a run
with them)."""

import hashlib
from pathlib import Path


def file_sha256(path: str | Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
