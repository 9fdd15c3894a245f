"""Atomic file writing: a killed job never leaves a file that looks complete."""

import contextlib
import errno
import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from fedavail.integrity import damage


class UnreadableFileError(ValueError):
    """A stage's input file that is damaged (truncated, zero bytes) or not what it should be. The message says what a
    rerun does with it: the workflow sets aside only files that fedavail.integrity finds damaged, not a whole file
    that holds the wrong content (a pickle that the prepared-data reader refuses, a trace in a partition's place)."""

    def __init__(self, path: str | os.PathLike, what: str, error: BaseException | str):
        if damage(path):
            hint = "rerun the workflow, which sets it aside and rebuilds it (or delete it and rerun)"
        else:
            hint = ("it reads back as a whole file, so a rerun does not set it aside: delete it and rerun the "
                    "workflow, which rebuilds it")
        super().__init__(f"{what} {path} is unreadable ({error}); {hint}")
        self.path = Path(path)


@contextlib.contextmanager
def reading(path: str | os.PathLike, what: str):
    """Turn any failure to parse `path` into UnreadableFileError naming it (a missing file stays FileNotFoundError)."""
    try:
        yield
    except FileNotFoundError:
        raise
    except Exception as error:  # truncated zip, missing arrays, bad JSON: all mean the file is damaged
        raise UnreadableFileError(path, what, error) from error


# Why a write ran out of room, by errno: a full file system, a used-up quota, a file-size limit.
NO_ROOM = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is used up",
           errno.EFBIG: "the file would exceed the file-size limit (ulimit -f)"}


class NoRoomError(OSError):
    """A write that ran out of room, naming the file it was writing (torch's own message for it is "unexpected pos")."""

    def __init__(self, path: Path, cause: OSError):
        super().__init__(cause.errno, f"could not write {path}: {NO_ROOM[cause.errno]}; make room and rerun: files "
                                      f"written before are kept, and training resumes from its last checkpoint")
        self.path = path


def out_of_room(error: BaseException | None) -> OSError | None:
    """The OSError in `error`'s chain of causes that says a write ran out of room (torch raises a RuntimeError
    caused by it), or None."""
    while error is not None:
        if isinstance(error, OSError) and error.errno in NO_ROOM:
            return error
        error = error.__cause__ or error.__context__
    return None


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds. A block that runs out of
    room (ENOSPC, EDQUOT, EFBIG anywhere in its exception's chain) raises NoRoomError naming `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException as error:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        cause = out_of_room(error)
        if cause is None or isinstance(error, NoRoomError):
            raise
        raise NoRoomError(path, cause) from error


def remove_temporaries(directory: str | os.PathLike) -> None:
    """Delete the temporary files that atomic_path left in `directory` when a process was killed mid-write. Call it
    only where no other process is writing (e.g. a run folder at the start of its one job)."""
    for path in Path(directory).glob(".*.tmp"):
        path.unlink(missing_ok=True)


def write_json(path: str | os.PathLike, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_npz(path: str | os.PathLike, arrays: dict[str, np.ndarray]) -> None:
    """np.savez_compressed, but byte-identical for identical arrays (fixed zip timestamps) and written atomically."""
    with atomic_path(path) as tmp, zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asarray(array), allow_pickle=False)
