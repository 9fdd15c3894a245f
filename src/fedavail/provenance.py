"""What a training run was computed from: the content hashes of its input files and the fingerprint a checkpoint must
match to be resumed."""

import hashlib
from pathlib import Path

from fedavail.integrity import json_digest


def file_sha256(path: str | Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def run_fingerprint(spec: dict, code_sha256: str, inputs_sha256: dict[str, str]) -> str:
    """Everything a run's numbers depend on: its spec, the training code and the content of every input. A checkpoint
    made under another fingerprint (e.g. before a partition was regenerated with another α) is never resumed."""
    return json_digest({"spec": spec, "code": code_sha256, "inputs": inputs_sha256})
