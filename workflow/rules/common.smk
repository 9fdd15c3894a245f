# Helpers shared by the rules: the config read strictly and validated, then the Plan every rule reads its jobs from
# (fedavail.plan.plan), damaged files set aside, and the job grid.
import functools
import hashlib
import math
import os
import shlex
import sys
from pathlib import Path

import fedavail.data.raw_digests as rd
import fedavail.integrity as fi
import fedavail.plan.names as fn
import fedavail.plan.paths as fp
import fedavail.plan.specs as fs
from fedavail.launcher import malloc_assignments
from fedavail.plan.errors import ConfigError
from fedavail.plan.load import command_line_overrides, load
from fedavail.plan.plan import Run
import fedavail.plan.captions as rc
import fedavail.plan.reports as rp
from snakemake.exceptions import WorkflowError

# Snakemake reads config files with YAML 1.1 and lets a repeated key silently win. Re-read the same files strictly
# (a repeated key is an error, 1e-3 is a number), expand grids and algorithm sets, validate against the schema and
# resolve the Plan (fedavail.plan.load); --config KEY=VALUE still wins, its VALUE read by the same strict reader
# (Snakemake's own reading makes the 2 of `execution={train_threads: 2}` a string). Rules read the checked config and
# the Plan.
try:
    PLAN = load(workflow.configfiles, command_line_overrides(workflow.config_settings.config_args))
except ConfigError as error:
    raise WorkflowError(f"invalid config: {error}")
config.clear()
config.update(PLAN.config)

EXECUTION = PLAN.execution
RUNS_FRAME = fp.path(fp.RUNS_FRAME, config=fp.frame_name(workflow.configfiles))
MALLOC_ASSIGNMENTS = malloc_assignments()


wildcard_constraints:
    seed=r"\d+",
    dataset=r"[^/]+",
    partition=r"[^/]+",
    trace=r"[^/]+",
    experiment=r"[^/]+",
    algorithm=r"[^/]+",
    report=r"[^/]+",


def derived(spec):
    """`spec`, a function of a job's wildcards, as a params function that Snakemake counts as derived (it takes
    `output`): the job's command receives the value, but Snakemake neither compares it with the last run's nor prints
    it in a dry run's reasons. sha256_of(spec) is the param that reruns the job when the value changes."""
    return lambda wildcards, output: spec(wildcards)


def sha256_of(spec):
    """The sha256 of the JSON `spec` gives a job: the param that reruns the job exactly when the spec changes, shown in
    a dry run's reasons as 64 characters instead of the whole spec."""
    return lambda wildcards: hashlib.sha256(spec(wildcards).encode()).hexdigest()


def dataset_spec(wildcards):
    return fs.as_json(PLAN.datasets[wildcards.dataset])


def partition_spec(wildcards):
    return fs.as_json(PLAN.partitions[wildcards.partition])


def trace_spec(wildcards):
    return fs.as_json(PLAN.traces[wildcards.trace])


def prepared_file(dataset):
    return fp.path(fp.PREPARED, dataset=dataset)


# sha256 of raw files and device records, kept between invocations and reused only for a file that provably did not
# change (fedavail.data.raw_digests).
RAW_DIGEST_CACHE = ".snakemake/fedavail/raw_sha256.json"


def raw_file_sha256(wildcards):
    """The dataset's raw files by content: replacing one reruns prepare, and through the prepared data what reads it."""
    return rd.raw_sha256(wildcards.dataset, fp.path(fp.RAW_DIR, dataset=wildcards.dataset), RAW_DIGEST_CACHE)


def partition_file(partition, seed):
    return fp.path(fp.PARTITION, partition=partition, seed=seed) + ".npz"


def trace_file(trace, seed):
    return fp.path(fp.TRACE, trace=trace, seed=seed) + ".npz"


def files_in_use():
    """Every intermediate and run output the config's jobs read or write: rule `all` asks for each (a deleted
    partition is rebuilt even when the runs that read it are finished), and fedavail.integrity checks each."""
    files = {RUNS_FRAME}
    for experiment, spec in PLAN.experiments.items():
        trace_partition = PLAN.trace_partition(spec.trace)
        for seed in spec.seeds:
            files.add(partition_file(spec.partition, seed))
            files.add(trace_file(spec.trace, seed))
            if trace_partition is not None:
                files.add(partition_file(trace_partition, seed))
        files.add(prepared_file(PLAN.dataset(experiment)))
        for run in PLAN.runs(experiment):
            files.update((f"{run.directory}/metrics.parquet", f"{run.directory}/summary.json"))
    return sorted(files)


def executes_jobs():
    """Whether this invocation runs jobs: not a dry run, --touch, a summary, a graph, a report or a listing. The
    Snakefile is read before Snakemake knows its executor, so the command line is read again."""
    from snakemake.cli import get_argument_parser

    try:
        args, _ = get_argument_parser().parse_known_args(sys.argv[1:])
    except SystemExit:
        return False
    return not any(getattr(args, flag, False) for flag in fi.NOT_EXECUTING_FLAGS)


# A damaged file (truncated, zero bytes, edited, or a run's outputs that are not that run's) is renamed to
# <name>.damaged before the DAG is built, so its rule rebuilds it in this run (rule `all` asks for it) and what
# depends on it is recomputed to the same numbers, instead of consumers rerunning on it, which deleted finished
# results and then failed. Only a run that executes jobs moves files; a dry run names them. Only the main process
# does this: cluster jobs re-read the Snakefile while other jobs run.
FILES_IN_USE = files_in_use()
if workflow.is_main_process:
    SETS_ASIDE = executes_jobs()
    for damaged, why in fi.damaged(FILES_IN_USE):
        if SETS_ASIDE:
            print(
                f"fedavail: {damaged} is damaged ({why}); set aside as {fi.set_aside(damaged)}, rebuilt in this run",
                file=sys.stderr,
            )
        else:
            print(
                f"fedavail: {damaged} is damaged ({why}); a run (not a dry run) sets it aside and rebuilds it",
                file=sys.stderr,
            )


def final_outputs():
    outputs = [RUNS_FRAME]
    for experiment in PLAN.experiments:
        outputs += list(rp.experiment_outputs(experiment).values())
    for name, report in PLAN.reports.items():
        outputs += list(rp.report_outputs(name, report).values())
    return outputs + FILES_IN_USE


def report_job(wildcards):
    """The job spec of a report rule: a `reports:` entry, an experiment's own report, or every run."""
    if "report" in wildcards.keys():
        return PLAN.report_job(wildcards.report)
    if "experiment" in wildcards.keys():
        return PLAN.experiment_job(wildcards.experiment)
    return PLAN.runs_job()


def report_run_dirs(wildcards):
    return rp.run_dirs(report_job(wildcards))


def report_inputs(wildcards):
    dirs = report_run_dirs(wildcards)
    return {"metrics": [f"{d}/metrics.parquet" for d in dirs], "summaries": [f"{d}/summary.json" for d in dirs]}


def report_spec(wildcards):
    return fs.as_json(report_job(wildcards))


def report_caption(wildcards, output):
    """Derived (it takes `output`): the caption's wording reruns nothing; the spec it describes is params.spec."""
    return rc.rst_escape(rc.caption(report_job(wildcards)))


def report_out(wildcards, output):
    """--out KEY=PATH for every named output of the rule."""
    return " ".join(f"{key}={shlex.quote(path)}" for key, path in output.items())


def trace_inputs(wildcards):
    partition = PLAN.trace_partition(wildcards.trace)
    return {} if partition is None else {"partition": partition_file(partition, wildcards.seed)}


def trace_records_sha256(wildcards):
    """The device records a trace reads, by content, as raw files are (a param, not an input: a replaced record reruns
    the trace and what reads it, a touched or copied one nothing); the config check found them in place."""
    return ",".join(rd.cached_sha256([Path(p) for p in PLAN.trace_records(wildcards.trace)], RAW_DIGEST_CACHE))


def trace_partition_option(wildcards, input):
    return f"--partition {shlex.quote(input.partition)}" if "partition" in input.keys() else ""


@functools.cache
def check_device_of_local_jobs():
    """execution.device naming CUDA that this machine lacks, when the jobs run here: an error before any job starts.
    Snakemake names its executor only when it builds the DAG (the training rules' input functions call this), and
    a dry run replaces it by its own; the executor asked for still shows in use_threads, which Snakemake turns on
    for every executor that is not local (cluster nodes may have GPUs the submit host lacks)."""
    executor = workflow.executor_plugin
    if executor is None or not workflow.is_main_process or not EXECUTION.device.startswith("cuda"):
        return
    if executor.common_settings.local_exec and not workflow.execution_settings.use_threads:
        from fedavail.train import DeviceUnavailable, check_device

        try:
            check_device(EXECUTION.device)
        except DeviceUnavailable as error:
            raise WorkflowError(
                f"invalid config: execution.device: {error}, where the jobs run; set execution.device: auto or "
                "cpu, or run the jobs through a cluster executor (profiles/slurm)"
            )


def train_code_sha256(wildcards):
    """A parameter, not the source files as inputs: a content hash of the code a run executes (fedavail.plan.sources)
    reruns the runs whose code changed, and nothing when the project folder is moved or copied (inputs would be
    absolute paths outside the workdir)."""
    return PLAN.training_code_sha256(wildcards.algorithm)


def train_inputs(wildcards):
    check_device_of_local_jobs()
    experiment = PLAN.experiments[wildcards.experiment]
    return {
        "prepared": prepared_file(PLAN.dataset(wildcards.experiment)),
        "partition": partition_file(experiment.partition, wildcards.seed),
        "trace": trace_file(experiment.trace, wildcards.seed),
    }


def train_spec(wildcards):
    return fs.as_json(PLAN.run_spec(Run(wildcards.experiment, wildcards.algorithm, int(wildcards.seed))))


def batch_inputs(batch, wildcards):
    """A batch job's inputs: the prepared data, and each run's partition and trace (in the order of its runs)."""
    check_device_of_local_jobs()
    experiments = [PLAN.experiments[run.experiment] for run in batch.runs]
    return {
        "prepared": prepared_file(batch.dataset),
        "partition": [partition_file(e.partition, run.seed) for e, run in zip(experiments, batch.runs)],
        "trace": [trace_file(e.trace, run.seed) for e, run in zip(experiments, batch.runs)],
    }


def batch_outputs(batch, name):
    return [f"{run.directory}/{name}" for run in batch.runs]


def batch_specs(batch, wildcards):
    return fs.as_json(list(batch.specs))


def batch_out_dirs(wildcards, output):
    return " ".join(shlex.quote(path.rsplit("/", 1)[0]) for path in output.metrics)


def batch_rounds(batch):
    """The rounds a batch job trains: its runs' rounds added up."""
    return sum(PLAN.experiments[run.experiment].training["rounds"] for run in batch.runs)


# Partitions and traces (a second each) before any training job: batch jobs run longest first (their priority is
# their rounds, train.smk), and without this the short batches whose inputs are ready first would make the longest
# ones wait for their partitions and traces.
DATA_FIRST = 1 + max((batch_rounds(batch) for batch in PLAN.training_batches), default=0)


def batch_runtime(batch, wildcards, attempt):
    """A batch job's time limit: its runs' limits added up (batched on a GPU they take less)."""
    return sum(run_runtime(run.experiment, attempt) for run in batch.runs)


def train_mem_mb(wildcards, input, attempt):
    """Host memory of a training job: a base for Python, torch (and a CUDA context) plus a multiple of its inputs.
    An input not made yet raises FileNotFoundError, which Snakemake reads as "to be determined" until the job is
    ready (input.size_mb does the same but leaves a coroutine unawaited: snakemake issue 4280)."""
    size_mb = sum(os.path.getsize(path) for path in input) / 2**20
    return int((3000 + 4 * size_mb) * attempt)


def run_runtime(experiment, attempt):
    """A run's time limit in minutes: 10 + rounds x execution.seconds_per_round, times the attempt."""
    rounds = PLAN.experiments[experiment].training["rounds"]
    return int(math.ceil(10 + rounds * EXECUTION.seconds_per_round / 60)) * attempt


def train_runtime(wildcards, attempt):
    return run_runtime(wildcards.experiment, attempt)


def malloc_environment(wildcards, threads):
    """The allocator settings a training process starts with (fedavail.launcher); derived (it takes `threads`), so
    it reruns nothing."""
    return MALLOC_ASSIGNMENTS


def train_execution_options(wildcards, threads):
    """How a training job runs, not what it computes (execution.*). A params function that takes `threads` counts as
    derived, so Snakemake leaves it out of the params that trigger reruns: changing these reruns nothing."""
    return (
        f"--threads {threads} --device {shlex.quote(EXECUTION.device)} --batched {EXECUTION.batched} "
        f"--checkpoint-every {EXECUTION.checkpoint_every} --log-every {EXECUTION.log_every}"
    )
