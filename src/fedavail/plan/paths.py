"""Where every stage's files are: one template per kind of file, written here only. The rules name them in their
`output:` (Snakemake fills the `{field}`s as wildcards) and Python fills them with `path`; a template filled only in
part (`path(RUN_DIR, seed=0)`) is a rule's pattern for the fields left."""

import re
from pathlib import Path

RAW_DIR = "data/raw/{dataset}"
RAW_MANIFEST = f"{RAW_DIR}/manifest.json"
PREPARED = "data/prepared/{dataset}.pt"
PARTITION = "data/partitions/{partition}/seed{seed}"  # .npz, and .csv, .png beside it
TRACE = "data/traces/{trace}/seed{seed}"  # .npz, and .png beside it
RUN_DIR = "results/runs/{experiment}/{algorithm}/seed{seed}"  # metrics.parquet, summary.json (and a run's records)
EXPERIMENT_DIR = "results/experiments/{experiment}"
REPORT_DIR = "results/reports/{report}"
# Every run of a config in one tidy frame, named after the config file(s) (frame_name): each config's is its own.
RUNS_FRAME = "results/frames/{config}.parquet"

_FIELD = re.compile(r"\{(\w+)\}")
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9._+-]")


def frame_name(config_files) -> str:
    """The name of a config's frame of runs: its config files' stems joined by "+" (config/claims.yaml: claims;
    config/config.yaml, the default run's: config), characters that a file name should not hold as "_"."""
    stems = [_NOT_IN_NAME.sub("_", Path(file).stem) for file in config_files]
    return "+".join(stems) or "config"


def path(template: str, **values) -> str:
    """`template` with the named fields filled; any other field stays a `{field}` for Snakemake."""
    return _FIELD.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)
