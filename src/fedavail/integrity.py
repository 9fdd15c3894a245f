"""Content digests (a run's fingerprint hashes its input files), and files that are damaged, edited or not what they
claim to be, which are never used: a real run renames them to `<name>.damaged` and rebuilds them (README). A truncated
file would otherwise look complete to Snakemake (a damaged trace would make it rerun the runs downstream, deleting
their finished results, before the job fails on the trace). A run's summary.json is sealed: it names its run and
carries a digest of its own content and of the metrics.parquet beside it, so an edited, emptied or copied summary or
metrics file is damaged."""

import functools
import hashlib
import json
import logging
import os
import zipfile
from pathlib import Path

log = logging.getLogger("fedavail.integrity")

# Snakemake options under which an invocation runs no job, so it must not set damaged files aside (nothing would
# rebuild them): argparse destinations of snakemake.cli.
NOT_EXECUTING_FLAGS = ("dryrun", "touch", "summary", "detailed_summary", "list_changes", "list_input_changes",
                       "list_params_changes", "list_untracked", "list_rules", "list_target_rules", "dag", "rulegraph",
                       "filegraph", "d3dag", "report", "lint", "print_compilation", "delete_all_output",
                       "delete_temp_output", "cleanup_metadata", "unlock", "containerize", "generate_unit_tests",
                       "archive", "export_cwl", "list_conda_envs", "conda_cleanup_envs")
ZIP_SUFFIXES = (".npz", ".pt")  # npz and torch files are zip archives, with a CRC per member
DIGEST = "digest"


def file_sha256(path: str | Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def json_digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def seal_summary(summary: dict, metrics: Path) -> dict:
    """`summary` with the digest of its content and of the metrics file written beside it."""
    unsealed = {k: v for k, v in summary.items() if k != DIGEST}
    return {**unsealed, DIGEST: hashlib.sha256(json_digest(unsealed).encode() + metrics.read_bytes()).hexdigest()}


def run_problem(run_dir: Path) -> str | None:
    """Why run_dir (results/runs/<experiment>/<algorithm>/seed<s>) does not hold that run's sealed outputs."""
    run_dir = Path(run_dir)
    summary_path, metrics = run_dir / "summary.json", run_dir / "metrics.parquet"
    try:
        summary = json.loads(summary_path.read_text())
        if not isinstance(summary, dict):
            return f"{summary_path} is not a JSON object"
        claimed = (summary.get("experiment"), summary.get("algorithm_id"), f"seed{summary.get('seed')}")
        if claimed != run_dir.parts[-3:]:
            return f"{summary_path} is the summary of {'/'.join(map(str, claimed))}, not of {run_dir}"
        if summary.get(DIGEST) != seal_summary(summary, metrics)[DIGEST]:
            return f"{summary_path} or {metrics} was changed after the run wrote them (digest mismatch)"
        spec = summary.get("spec")
        if not isinstance(spec, dict) or (spec.get("experiment"), spec.get("algorithm_id"),
                                          f"seed{spec.get('seed')}") != claimed:
            return f"{summary_path} does not carry its run's spec (the settings reports read)"
    except Exception as error:  # unreadable JSON, a missing metrics file: the run's outputs are damaged
        return f"{type(error).__name__}: {error}"
    return None


def damage(path: Path, check_run=run_problem) -> str | None:
    """Why the file at `path` is damaged, or None if it reads back whole (and, for a run's outputs, is sealed)."""
    path = Path(path)
    if path.name in ("summary.json", "metrics.parquet") and path.parent.name.startswith("seed"):
        return check_run(path.parent)
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


def damaged(paths) -> list[tuple[Path, str]]:
    """Every existing file among `paths` that is damaged, with why (a run's two outputs are checked once)."""
    run_problem_once = functools.cache(run_problem)
    checked = ((path, damage(path, run_problem_once)) for path in map(Path, paths) if path.is_file())
    return [(path, why) for path, why in checked if why]


def set_aside(path: Path, suffix: str = ".damaged", why: str | None = None, then: str = "") -> Path:
    """Rename `path` to `<name><suffix>` (replacing an older one) and return the new path; logged with `why`."""
    aside = path.with_name(path.name + suffix)
    os.replace(path, aside)
    if why is not None:
        log.warning("%s cannot be used (%s); set aside as %s, %s", path, why, aside, then)
    return aside


def read_or_set_aside(path: Path, read, suffix: str, then: str):
    """`read(path)`, or None when there is no file at `path`; a file that `read` fails on in any way (damaged,
    edited, not what it claims to be) is set aside, so it never blocks a rerun, and None is returned."""
    if not path.exists():
        return None
    try:
        return read(path)
    except Exception as error:  # EOFError, zip errors, missing keys, bad JSON, a failed check: all mean set aside
        set_aside(path, suffix, f"{type(error).__name__}: {error}", then)
        return None
