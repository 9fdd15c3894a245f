"""What a training run was computed from: the content hashes of its input files, the fingerprint a checkpoint must
match to be resumed, and the header that opens every training log."""

import hashlib
import json
import logging
from pathlib import Path


def file_sha256(path: str | Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def run_fingerprint(spec: dict, code_sha256: str, inputs_sha256: dict[str, str]) -> str:
    """Everything a run's numbers depend on: its spec, the training code and the content of every input. A checkpoint
    made under another fingerprint (e.g. before a partition was regenerated with another α) is never resumed."""
    identity = {"spec": spec, "code": code_sha256, "inputs": inputs_sha256}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def log_run_header(log: logging.Logger, *, spec: dict, inputs: dict[str, Path], inputs_sha256: dict[str, str],
                   device, threads: int, batched: bool, resume_round: int | None) -> None:
    """One block at the top of the log that says what ran: spec, inputs with their hashes, device, threads and the
    round it starts from."""
    log.info("run spec: %s", json.dumps(spec, sort_keys=True))
    for role, path in inputs.items():
        log.info("input %s: %s sha256=%s", role, path, inputs_sha256[role])
    log.info("device=%s threads=%d batched=%s", device, threads, batched)
    log.info("start: %s", "fresh, round 0" if resume_round is None else f"resuming at round {resume_round}")
