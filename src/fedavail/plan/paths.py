"""Where every stage's files are: one template per kind of file, written here only. The rules name them in their
`output:` (Snakemake fills the `{field}`s as wildcards) and Python fills them with `path`; a template filled only in
part (`path(RUN_DIR, seed=0)`) is a rule's pattern for the fields left."""

import re

RAW_DIR = "data/raw/{dataset}"
RAW_MANIFEST = f"{RAW_DIR}/manifest.json"
PREPARED = "data/prepared/{dataset}.pt"
PARTITION = "data/partitions/{partition}/seed{seed}"  # .npz, and .csv, .png beside it
TRACE = "data/traces/{trace}/seed{seed}"  # .npz, and .png beside it
RUN_DIR = "results/runs/{experiment}/{algorithm}/seed{seed}"  # metrics.parquet, summary.json (and a run's records)
EXPERIMENT_DIR = "results/experiments/{experiment}"
REPORT_DIR = "results/reports/{report}"
RUNS_FRAME = "results/runs.parquet"

_FIELD = re.compile(r"\{(\w+)\}")


def path(template: str, **values) -> str:
    """`template` with the named fields filled; any other field stays a `{field}` for Snakemake."""
    return _FIELD.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)
