"""Damaged files are set aside before the workflow plans its jobs, so that Snakemake rebuilds them.

A truncated intermediate (a partition, a trace, a prepared dataset) or run output (metrics.parquet, summary.json)
would otherwise look complete to Snakemake: a damaged trace, for example, makes it rerun the trained runs downstream,
deleting their finished results before the job fails on the trace. The workflow renames a damaged file to
`<name>.damaged` and asks for it as a target, so its own rule rebuilds it (byte-identically: every stage is
deterministic) and the runs that depend on it are recomputed to the same numbers."""

import json
import os
import zipfile
from pathlib import Path

ZIP_SUFFIXES = (".npz", ".pt")  # npz and torch files are zip archives, with a CRC per member


def damage(path: Path) -> str | None:
    """Why the file at `path` is damaged, or None if it reads back whole."""
    try:
        if path.suffix in ZIP_SUFFIXES:
            with zipfile.ZipFile(path) as archive:
                bad = archive.testzip()
            return None if bad is None else f"member {bad} fails its CRC check"
        if path.suffix == ".json":
            json.loads(path.read_text())
        elif path.suffix == ".parquet":
            import pyarrow.parquet as pq

            pq.read_metadata(path)
    except Exception as error:  # any failure to read the file back is damage
        return f"{type(error).__name__}: {error}"
    return None


def set_aside_damaged(paths) -> list[tuple[Path, Path, str]]:
    """Rename every existing damaged file among `paths` to `<name>.damaged`; return (path, new path, why)."""
    moved = []
    for path in map(Path, paths):
        if path.is_file() and (why := damage(path)):
            aside = path.with_name(path.name + ".damaged")
            os.replace(path, aside)
            moved.append((path, aside, why))
    return moved
