"""Writes that run out of room (a full disk, a quota, a file-size limit) name the file they were writing and keep
what was there; an unreadable input's message says whether a rerun sets it aside."""

import errno
import resource
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch

import fedavail.checkpoint as checkpoint
from fedavail.availability.traces import make_trace, save_trace
from fedavail.io import NoRoomError, UnreadableFileError, atomic_path, write_npz
from fedavail.partitions.partition import load_partition

ROOM = {"fingerprint": "f", "rows": [], "next_round": 1, "elapsed": 0.0, "threads": 1, "batched": False}


def save(path, size: int) -> None:
    checkpoint.save_checkpoint(path, tensors={"state": {"x": torch.arange(size, dtype=torch.float32)}}, **ROOM)


def test_a_write_that_runs_out_of_room_names_its_file_and_keeps_the_old_one(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text("{}")
    with pytest.raises(NoRoomError, match=rf"could not write {path}: no space left on the device; make room and "
                                          rf"rerun") as error, atomic_path(path) as tmp:
        tmp.write_text("{")
        raise OSError(errno.ENOSPC, "No space left on device")
    assert error.value.errno == errno.ENOSPC and error.value.path == path
    assert path.read_text() == "{}" and list(tmp_path.iterdir()) == [path]


class FullDisk:
    """A file that takes `room` bytes, then fails as a full disk does."""

    def __init__(self, path, mode, room: int = 1000):
        self.file, self.room = open(path, mode), room

    def write(self, data) -> int:
        if self.file.tell() + len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.file.write(data)

    def __getattr__(self, name):
        return getattr(self.file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()


def test_a_checkpoint_on_a_full_disk_names_its_file_not_torchs_position(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    save(path, 10)
    monkeypatch.setattr(checkpoint, "open", FullDisk, raising=False)
    with pytest.raises(NoRoomError, match=rf"could not write {path}: no space left on the device") as error:
        save(path, 10_000)
    assert isinstance(error.value.__cause__, RuntimeError)  # torch's "unexpected pos ..." caused by the OSError
    assert list(tmp_path.iterdir()) == [path]
    assert checkpoint.load_checkpoint(path, "f", torch.device("cpu")).tensors["state"]["x"].numel() == 10


_OVER_THE_LIMIT = """
import sys, torch, pandas as pd
from fedavail.checkpoint import save_checkpoint
from fedavail.io import NoRoomError, atomic_path
room = dict(fingerprint="f", rows=[], next_round=1, elapsed=0.0, threads=1, batched=False)
try:
    save_checkpoint(sys.argv[1] + "/checkpoint.pt", tensors={"state": {"x": torch.zeros(100_000)}}, **room)
except NoRoomError as error:
    print(error)
try:
    with atomic_path(sys.argv[1] + "/metrics.parquet") as tmp:
        pd.DataFrame({"round": range(100_000)}).to_parquet(tmp)
except NoRoomError as error:
    print(error)
"""


def _file_size_limit():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))


def test_writes_past_a_file_size_limit_name_their_files(tmp_path):
    """Real writes of torch and pyarrow hitting a limit (RLIMIT_FSIZE), in a process of their own."""
    result = subprocess.run([sys.executable, "-c", _OVER_THE_LIMIT, str(tmp_path)], capture_output=True, text=True,
                            timeout=300, preexec_fn=_file_size_limit)
    assert result.returncode == 0, result.stderr
    limit = "the file would exceed the file-size limit (ulimit -f); make room and rerun"
    assert result.stdout.splitlines() == [f"[Errno {errno.EFBIG}] could not write {tmp_path}/{name}: {limit}: files "
                                          f"written before are kept, and training resumes from its last checkpoint"
                                          for name in ("checkpoint.pt", "metrics.parquet")]
    assert list(tmp_path.iterdir()) == []


def test_only_a_file_that_a_rerun_sets_aside_says_so(tmp_path):
    """A truncated partition fails the rerun's check (fedavail.integrity) and is set aside; a trace in a partition's
    place is a whole npz file, which the rerun keeps: it must be deleted by hand."""
    truncated = tmp_path / "truncated.npz"
    write_npz(truncated, {"offsets": np.arange(100)})
    truncated.write_bytes(truncated.read_bytes()[:60])
    with pytest.raises(UnreadableFileError, match="rerun the workflow, which sets it aside and rebuilds it"):
        load_partition(truncated)
    trace = tmp_path / "trace.npz"
    save_trace(trace, make_trace({"model": "bernoulli", "p": 0.5}, 4, 3, seed=0))
    with pytest.raises(UnreadableFileError, match="partition .*trace.npz is unreadable .*; it reads back as a whole "
                                                  "file, so a rerun does not set it aside: delete it") as error:
        load_partition(trace)
    assert "sets it aside" not in str(error.value)
