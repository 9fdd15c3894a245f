"""sha256 of a dataset's raw files, a param of the prepare rule (workflow/rules/common.smk). Nothing Snakemake looks
at changes when a raw file is replaced after a run (the download step's manifest, its only output, is not rewritten);
as a param, the digests make Snakemake rerun prepare, and so what depends on it, when a file's content changes. They
are cached in a JSON file, so unchanged multi-GB archives are not read at every invocation, and reused only when the
file provably did not change: same size, modification time, inode and inode change time. A copy can keep the first two
(`cp -p`, `rsync -a`), never the change time, which the kernel sets on every write, rename or utime. A file changed in
the last RACY_NS when it was hashed is hashed again next time (its change time may not have ticked yet)."""

import json
import time
from pathlib import Path

from fedavail.data.download import DatasetError, locate
from fedavail.integrity import file_sha256
from fedavail.io import write_json

# The param's value while the download step has not put the files in place. Snakemake evaluates params again when a
# job starts, after the download, so a finished prepare job records the digests.
NOT_IN_PLACE = "raw files not in place"
STAT_FIELDS = ("st_size", "st_mtime_ns", "st_ctime_ns", "st_ino", "st_dev")
RACY_NS = 2_000_000_000  # timestamps tick in jiffies (a few ms) on Linux; 2 s leaves a wide margin


def cached_sha256(paths: list[Path], cache_path: Path) -> list[str]:
    """The sha256 of each file, read again unless its size, modification time, inode and inode change time are the
    cached ones."""
    try:
        cache = json.loads(Path(cache_path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        cache = {}  # an unreadable or malformed cache only costs the time it would have saved
    cache = cache if isinstance(cache, dict) else {}
    digests, changed = [], False
    for path in paths:
        stat = path.stat()  # before reading: a file changed while being hashed gets a new stat, so is read again
        key, state = str(path.resolve()), [getattr(stat, field) for field in STAT_FIELDS]
        entry = cache.get(key)
        if not (isinstance(entry, dict) and entry.get("stat") == state and isinstance(entry.get("sha256"), str)):
            entry = {"stat": state, "sha256": file_sha256(path)}
            if stat.st_ctime_ns < time.time_ns() - RACY_NS:
                cache[key] = entry
            else:  # changed too recently to tell a later change by its timestamps
                cache.pop(key, None)
            changed = True
        digests.append(entry["sha256"])
    if changed:
        write_json(cache_path, cache)
    return digests


def raw_sha256(name: str, raw_dir: Path, cache_path: Path) -> str:
    """{path under raw_dir: sha256} of dataset `name`'s raw files as JSON, or NOT_IN_PLACE when they are not all
    there (the prepare job itself then reports what is missing)."""
    raw_dir = Path(raw_dir)
    try:
        paths = locate(name, raw_dir)
    except DatasetError:
        return NOT_IN_PLACE
    digests = cached_sha256(paths, cache_path)
    return json.dumps({path.relative_to(raw_dir).as_posix(): d for path, d in zip(paths, digests)}, sort_keys=True)
