"""Training runs: set up (prepared data, partition, trace; model, algorithm, local trainer, state, resume), loop
rounds, and write (evaluation schedule, per-round metrics in parquet, checkpoints, a summary with provenance in JSON).
`run` trains one run; `run_together` several in one process (the seeds of an experiment x algorithm, and runs of other
experiments with the same settings), each with its own partition, trace, keyed streams, state and outputs, the local
work of all their participants one back-end call (fedavail.engine.local.train_together)."""

import functools
import json
import logging
import math
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from fedavail import __version__, integrity, stopping
from fedavail.algorithms import build_algorithm
from fedavail.algorithms.base import Algorithm, RoundContext, State, local_work, state_bytes
from fedavail.availability.clock import Clock, ClockOptions, RoundTime
from fedavail.availability.replay import FedScaleReplay
from fedavail.availability.traces import Trace, load_trace
from fedavail.checkpoint import Checkpoint, load_checkpoint, save_checkpoint, set_aside
from fedavail.data.prepared import load_prepared
from fedavail.divergence import divergence
from fedavail.engine.backend import picks_vmap
from fedavail.engine.client_data import ClientData
from fedavail.engine.evaluate import evaluate
from fedavail.engine.local import ClientTrainer, LocalResult, LocalWork, train_together, vmap_supported
from fedavail.engine.params import FlatModel
from fedavail.integrity import DIGEST, file_sha256, json_digest, seal_summary
from fedavail.io import atomic_path, remove_temporaries, write_json, write_text
from fedavail.models import build_model
from fedavail.partitions.partition import load_partition
from fedavail.plan.experiments import AugmentationOptions, ExecutionOptions, TrainingOptions
from fedavail.plan.local import LocalOptions, resolve_local
from fedavail.plan.sources import executed_algorithms, training_code_sha256
from fedavail.rng import numpy_generator, torch_generator

log = logging.getLogger("fedavail.train")


class DeviceUnavailable(RuntimeError):
    """The CUDA device asked for is not on this machine."""


def check_device(requested: str) -> torch.device:
    """The device `requested` names (auto: CUDA if present); DeviceUnavailable for a CUDA device this machine lacks."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise DeviceUnavailable(f"{requested!r}, but CUDA is not available on this machine")
    if requested.startswith("cuda") and int(requested.partition(":")[2] or 0) >= torch.cuda.device_count():
        raise DeviceUnavailable(f"{requested!r}, but this machine has {torch.cuda.device_count()} CUDA device(s)")
    return torch.device(requested)


@dataclass
class RunPaths:
    """A run's files. `finished` (finished.json) holds what a finished run wrote: its fingerprint, metrics rows,
    summary and their digest; Snakemake does not delete it when it reruns the job, and the run's outputs are then
    rewritten from it, not recomputed."""

    out_dir: Path

    def __post_init__(self):
        self.metrics, self.summary, self.checkpoint, self.finished = (
            self.out_dir / name for name in ("metrics.parquet", "summary.json", "checkpoint.pt", "finished.json"))


@functools.cache  # once per process: a batch job finishes many runs
def git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


EXECUTION_DEFAULTS = ExecutionOptions()  # the config's `execution` defaults (fedavail.plan.experiments)


@dataclass
class Execution:
    """Where and how a run executes: none of it changes what the run computes (beyond float reassociation)."""

    threads: int = EXECUTION_DEFAULTS.train_threads
    device: str = EXECUTION_DEFAULTS.device
    batched: str | bool = EXECUTION_DEFAULTS.batched
    checkpoint_every: int = EXECUTION_DEFAULTS.checkpoint_every
    log_every: int = EXECUTION_DEFAULTS.log_every


@dataclass
class RunInputs:
    """One run's partition, trace, output folder and spec (the prepared dataset is the same for a process's runs), and
    its seed, read from the spec once: every stream of the run is keyed by it."""

    partition: Path
    trace: Path
    out_dir: Path
    spec: dict
    seed: int = field(init=False)

    def __post_init__(self):
        self.paths = RunPaths(Path(self.out_dir))
        self.seed = int(self.spec["seed"])

    def identify(self, prepared: Path, prepared_sha256: str, code_sha256: str, device: torch.device) -> None:
        """Hash the run's `inputs` (role -> (path, sha256); the prepared dataset, the same for every run, is hashed
        once by the caller), take its `fingerprint` and load its resumable `checkpoint` (None: start fresh)."""
        remove_temporaries(self.paths.out_dir)
        self.inputs = {"prepared": (prepared, prepared_sha256),
                       "partition": (Path(self.partition), file_sha256(self.partition)),
                       "trace": (Path(self.trace), file_sha256(self.trace))}
        # Everything the run's numbers depend on: a checkpoint or finished.json made under another fingerprint (e.g.
        # before a partition was regenerated with another α) is never resumed or restored.
        self.fingerprint = json_digest({"spec": self.spec, "code": code_sha256,
                                        "inputs": {role: sha256 for role, (_, sha256) in self.inputs.items()}})
        self.checkpoint = load_checkpoint(self.paths.checkpoint, self.fingerprint, device)


def run(prepared_path: Path, partition_path: Path, trace_path: Path, out_dir: Path, spec: dict,
        execution: Execution = Execution(), stop_after_round: int | None = None) -> dict:
    """Run (or resume) one training run described by `spec` = {seed, training: {..., local: {...}}, algorithm: {...}}
    (fedavail.plan.plan.Plan.run_spec resolves the local optimisation block, the algorithm's lr included; a spec written
    by hand may give `lr` in its algorithm block instead, which overrides training.local.lr). Returns the summary, or
    {"stopped_at": round} when the run stopped early (`stop_after_round` stops it as if preempted: tests of resume)."""
    inputs = RunInputs(Path(partition_path), Path(trace_path), Path(out_dir), spec)
    return run_together(prepared_path, [inputs], execution, stop_after_round)[0]


def run_together(prepared_path: Path, runs: list[RunInputs], execution: Execution = Execution(),
                 stop_after_round: int | None = None, dtype: torch.dtype = torch.float32) -> list[dict]:
    """Run (or resume) several runs in one process; one result per run, as `run`'s.

    Specs may differ only in experiment, algorithm_id and seed (RUN_IDENTITY). Each finished run leaves its
    finished.json (`RunPaths.finished`), and a run with a valid one of the same fingerprint is not trained again: its
    outputs are rewritten as they were (Snakemake deletes a job's outputs before it reruns it, e.g. for an added seed
    or another seeds_per_job). `dtype` float64 is for exactness checks (tests)."""
    started = time.perf_counter()
    _check_same_settings([inputs.spec for inputs in runs])
    stopping.install()
    # The algorithm is built once, its hyperparameters checked and completed once: it is its own resolved options
    # (each algorithm class extends its options class), so the code hash reads what it executes from it.
    entry = runs[0].spec["algorithm"]
    algorithm = build_algorithm(entry["algorithm"], {k: v for k, v in entry.items() if k not in ("algorithm", "lr")})
    code_sha256 = training_code_sha256(executed_algorithms(entry["algorithm"], algorithm))
    device = check_device(execution.device)
    prepared_sha256 = file_sha256(prepared_path)
    for inputs in runs:
        inputs.identify(Path(prepared_path), prepared_sha256, code_sha256, device)
    results = [_restore_finished(inputs) for inputs in runs]
    pending = [j for j, result in enumerate(results) if result is None]
    if not pending:
        return results
    runs = [runs[j] for j in pending]
    threads = next((inputs.checkpoint.threads for inputs in runs if inputs.checkpoint is not None), execution.threads)
    if threads != execution.threads:
        log.warning("keeping the checkpoint's %d threads (asked for %d): other thread counts reassociate float sums "
                    "and the resumed run would match neither uninterrupted run", threads, execution.threads)
    torch.set_num_threads(threads)
    shared = _Shared(Path(prepared_path), runs[0], algorithm, execution, device, threads, dtype, started, code_sha256)
    training_runs = [TrainingRun(shared, inputs, label=f"{_name(inputs.spec)}: " if len(runs) > 1 else "")
                     for inputs in runs]
    _train_rounds(training_runs, int(shared.training["rounds"]), execution.checkpoint_every, stop_after_round)
    for j, training_run in zip(pending, training_runs):
        results[j] = training_run.result
    return results


def _restore_finished(inputs: RunInputs) -> dict | None:
    """The summary of a run finished before under its fingerprint, its outputs rewritten from its finished.json; else
    None."""
    paths = inputs.paths
    finished = integrity.read_or_set_aside(paths.finished, lambda path: _read_finished(path, inputs), ".invalid",
                                           "the seed is trained again")
    if finished is None:
        return None
    summary = _write_metrics(paths, finished["rows"], finished["summary"])
    log.info("seed %s finished before with this spec, code and inputs: outputs rewritten from %s", inputs.seed,
             paths.finished)
    return summary


def _read_finished(path: Path, inputs: RunInputs) -> dict | None:
    """The finished.json at `path` if made under the run's fingerprint, else None (the seed is trained again and the
    file replaced); ValueError when it cannot be restored: edited, or not a whole run of its spec."""
    spec = inputs.spec
    finished = json.loads(path.read_text())
    if not isinstance(finished, dict):
        raise ValueError("not a JSON object")
    if finished.get("fingerprint") != inputs.fingerprint:
        return None
    if finished.get(DIGEST) != json_digest({k: v for k, v in finished.items() if k != DIGEST}):
        raise ValueError("its content does not match its digest")
    summary, rows = finished.get("summary"), finished.get("rows")
    if not isinstance(summary, dict) or summary.get("spec") != spec or summary.get("seed") != inputs.seed:
        raise ValueError("its summary is not of this run's spec and seed")
    if not isinstance(rows, list) or [row.get("round") for row in rows] != list(range(len(rows))):
        raise ValueError("its rows are not rounds 0, 1, 2, ...")
    diverged_at = summary.get("diverged_at")
    if len(rows) != summary.get("rounds_completed") or len(rows) != (
            int(spec["training"]["rounds"]) if diverged_at is None else diverged_at + 1):
        raise ValueError(f"{len(rows)} rows for a run of {spec['training']['rounds']} rounds")
    for row in rows:
        for name, value in row.items():
            if isinstance(value, (int, float)) and not math.isnan(value) and (
                    "acc" in name and not 0 <= value <= 1 or "loss" in name and not value >= 0):
                raise ValueError(f"round {row['round']}: {name} = {value} is out of range")
    return finished


def _write_metrics(paths: RunPaths, rows: list[dict], summary: dict) -> dict:
    """The run's metrics, then its summary sealed with them (returned). Metrics: one row per round, a column per
    metric in order of first appearance, typed as pandas types such rows: int64 where every round holds an integer,
    else float64 with NaN where a round lacks the metric. The arrays are built from raw buffers because converting
    Python values (pyarrow.array) imports pandas: ~0.3 s of every training job."""
    columns = {}
    for name in dict.fromkeys(key for row in rows for key in row):
        values = [row.get(name) for row in rows]
        if all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in values):
            array = np.array(values, dtype=np.int64)
        else:
            array = np.array([math.nan if v is None else v for v in values], dtype=np.float64)
        columns[name] = pa.Array.from_buffers(pa.from_numpy_dtype(array.dtype), len(array), [None, pa.py_buffer(array)])
    with atomic_path(paths.metrics) as tmp:
        pq.write_table(pa.Table.from_arrays(list(columns.values()), names=list(columns)), tmp)
    sealed = seal_summary(summary, paths.metrics)
    write_json(paths.summary, sealed)
    return sealed


# What may differ between runs trained in one process: which run each is. Everything they compute with is shared.
RUN_IDENTITY = ("experiment", "algorithm_id", "seed")


def _check_same_settings(specs: list[dict]) -> None:
    first = {k: v for k, v in specs[0].items() if k not in RUN_IDENTITY}
    for spec in specs[1:]:
        if {k: v for k, v in spec.items() if k not in RUN_IDENTITY} != first:
            raise ValueError(f"runs trained together must share every setting but {', '.join(RUN_IDENTITY)}; "
                             f"{_name(spec)}'s spec differs from {_name(specs[0])}'s")
    if len({_name(s) for s in specs}) < len(specs):
        raise ValueError(f"runs trained together must differ: {[_name(s) for s in specs]}")


def _name(spec: dict) -> str:
    return f"{spec.get('experiment')}/{spec.get('algorithm_id')} seed {spec['seed']}"


class _Shared:
    """What all runs of one process share: the device, the prepared dataset on it, one model (its parameters are
    only a workspace; every run's weights are vectors), the algorithm (stateless: each run's state is its own
    tensors), the back end and the runs' settings (those of `first`, which every run shares: _check_same_settings)."""

    def __init__(self, prepared: Path, first: RunInputs, algorithm: Algorithm, execution: Execution,
                 device: torch.device, threads: int, dtype: torch.dtype, started: float, code_sha256: str):
        self.device, self.threads, self.dtype, self.execution, self.started = device, threads, dtype, execution, started
        self.algorithm = algorithm
        self.code_sha256 = code_sha256  # training_code_sha256 of the run's algorithms, computed once per process
        self.training = training = first.spec["training"]
        self.dataset = {k: v.to(device) if torch.is_tensor(v) else v for k, v in load_prepared(prepared).items()}
        self.model = FlatModel(build_model(training["model"], self.dataset, first.seed).to(dtype)).to(device)
        # training.local with the algorithm's lr (a hand-written spec's, see `run`): every run's, as they share it
        self.local = resolve_local(training.get("local"), first.spec["algorithm"].get("lr"), "training.local")
        self.batched = picks_vmap(training["model"], self.local.batch_size, device) if execution.batched == "auto" \
            else bool(execution.batched)
        if self.batched and not vmap_supported(self.model):
            log.info("model %s cannot be batched with vmap (LSTM); using the per-client loop", training["model"])
            self.batched = False


class TrainingRun:
    """One run inside a training process: its seed, algorithm, local trainer, trace and state, and its outputs
    (metrics rows on the evaluation schedule, checkpoints, the summary with provenance). `label` names it in log
    lines."""

    def __init__(self, shared: _Shared, run_inputs: RunInputs, label: str):
        spec, training, device, checkpoint = run_inputs.spec, shared.training, shared.device, run_inputs.checkpoint
        self.shared, self.spec, self.paths, self.inputs = shared, spec, run_inputs.paths, run_inputs.inputs
        self.fingerprint, self.label = run_inputs.fingerprint, label
        self.seed = seed = run_inputs.seed
        self.algorithm = shared.algorithm  # a hand-written spec's lr is in shared.local
        partition = load_partition(run_inputs.partition)
        self.trace = trace = load_trace(run_inputs.trace)
        rounds = int(training["rounds"])
        if trace.available.shape[0] < rounds:
            raise ValueError(f"trace {run_inputs.trace} has {trace.available.shape[0]} rounds, the run needs {rounds}")
        if trace.available.shape[1] != partition.num_clients:
            raise ValueError(f"trace {run_inputs.trace} has {trace.available.shape[1]} clients, "
                             f"partition {run_inputs.partition} has {partition.num_clients}")

        self.clock = _clock(trace, partition.sizes, shared.local, shared.model.dim, str(run_inputs.trace))
        self.round_time: RoundTime | None = None  # the clock's view of the round being trained
        augmentation = AugmentationOptions(**training.get("augmentation", {}))
        data = ClientData(shared.dataset, partition.offsets, partition.indices, device, augmentation, shared.dtype)
        self.trainer = ClientTrainer(shared.model, data, shared.local, seed, shared.batched)
        # A hand-written spec may omit it.
        samples = int(training.get("train_eval_samples", TrainingOptions.train_eval_samples))
        train_eval = _train_eval_subset(shared.dataset, samples, seed).to(device)
        self.splits = {"test": (shared.dataset["test_x"], shared.dataset["test_y"]),
                       "train": (shared.dataset["train_x"][train_eval], shared.dataset["train_y"][train_eval])}

        x0 = FlatModel(build_model(training["model"], shared.dataset, seed).to(shared.dtype)).flatten().to(device)
        self.state = self.algorithm.init_state(x0, data.client_sizes().to(device))
        self.local_state = self.trainer.init_state(partition.num_clients, x0.dtype, device)
        self.rows, self.next_round, self.elapsed_before = [], 0, 0.0
        if checkpoint is not None and _resumable(checkpoint, {"algorithm": self.state, "local": self.local_state},
                                                 rounds, shared.batched, self.paths.checkpoint):
            self.state, self.local_state = checkpoint.tensors["algorithm"], checkpoint.tensors["local"]
            self.rows, self.next_round, self.elapsed_before = checkpoint.rows, checkpoint.next_round, checkpoint.elapsed
            if self.clock is not None:
                self.clock.elapsed_s = self.rows[-1]["virtual_s"]
        self.diverged_at = self.divergence = None  # the round and the why, once the run diverges
        self.result: dict | None = None  # the summary once written, or {"stopped_at": round}
        # The header that opens every training log: what ran, from which inputs, where, and from which round.
        log.info("run spec: %s", json.dumps(spec, sort_keys=True))
        for role, (path, sha256) in self.inputs.items():
            log.info("input %s: %s sha256=%s", role, path, sha256)
        log.info("device=%s threads=%d batched=%s", device, shared.threads, shared.batched)
        log.info("start: %s", f"resuming at round {self.next_round}" if self.next_round else "fresh, round 0")
        self.progress = _progress(self.next_round, rounds, label)

    def context(self, t: int) -> RoundContext:
        """Round t's context; under a clock, who may take part is the clock's (fedavail.availability.clock.Clock:
        the deadline, and a FedScale replay's choice where this run's clock stands)."""
        available = self.trace.available[t]
        if self.clock is not None:
            position = self.local_state.get("epoch_batch")  # epoch-based work: the clients' cursors in their epochs
            self.round_time = self.clock.open_round(t, available, None if position is None else position.cpu().numpy())
            available = self.round_time.available
        prob, snapshot = (None if table is None else table[t] for table in (self.trace.prob, self.trace.snapshot))
        available, prob, snapshot = (None if row is None else torch.from_numpy(row).to(self.trainer.data.device)
                                     for row in (available, prob, snapshot))
        return RoundContext(t, available, prob, snapshot, lr=self.trainer.options.lr_at(t),
                            generator=torch_generator(self.seed, "algorithm", t))

    def append_row(self, t: int, ctx: RoundContext, clients: torch.Tensor, result: LocalResult,
                   round_started: float) -> bool:
        """Append round t's row (evaluated when due); True when the run diverged in it."""
        training = self.shared.training
        row = {"round": t, "participants": len(clients), "lr": ctx.lr,
               "local_loss": result.loss.mean().item() if len(clients) else math.nan,
               "local_acc": result.accuracy.mean().item() if len(clients) else math.nan}
        if self.clock is not None:  # the round lasts as long as its slowest participant needs
            ended = self.clock.record_ended
            row["virtual_s"] = self.clock.close_round(self.round_time, clients.cpu().numpy())
            if self.clock.record_ended and not ended:
                log.warning("%sround %d: no client that could take part starts a session after %.0f s of device time: "
                            "the record has ended, and the rounds left have no participants", self.label, t,
                            row["virtual_s"])
            if self.clock.options.deadline_s is not None:
                row["late"] = self.round_time.late
            if self.round_time.online is not None:
                row["online"] = self.round_time.online
        row.update(self.algorithm.round_metrics(self.state))
        evaluated = t % int(training["eval_every"]) == 0 or t >= int(training["rounds"]) - int(training["last_n"])
        # Every round the server model is checked; the other models an algorithm evaluates (FedSWE's mean of the
        # local copies, a pass over [m, d]) only on the rounds that evaluate them.
        models = self.algorithm.eval_models(self.state) if evaluated else \
            {"global": self.algorithm.server_model(self.state)}
        self.divergence = divergence(models, row["local_loss"], len(clients), int(self.shared.dataset["num_classes"]))
        if self.divergence:
            self.diverged_at = t
            log.warning("%sdiverged at round %d (%s); stopping the run", self.label, t, self.divergence)
        elif evaluated:
            row.update(self.algorithm.eval_metrics(self.state))
            for name, weights in models.items():
                suffix = "" if name == "global" else f"_{name}"
                for split, (x, y) in self.splits.items():
                    row[f"{split}_loss{suffix}"], row[f"{split}_acc{suffix}"] = evaluate(
                        self.shared.model, weights, x, y, self.trainer.data.inputs)
        row["seconds"] = time.perf_counter() - round_started
        self.rows.append(row)
        if not self.divergence:
            self.progress(t, row, self.shared.execution.log_every)
        return self.diverged_at is not None

    def elapsed(self) -> float:
        return self.elapsed_before + time.perf_counter() - self.shared.started

    def save(self) -> None:
        save_checkpoint(self.paths.checkpoint, fingerprint=self.fingerprint,
                        tensors={"algorithm": self.state, "local": self.local_state}, rows=self.rows,
                        next_round=self.next_round, elapsed=self.elapsed(), threads=self.shared.threads,
                        batched=self.shared.batched)

    def finish(self) -> None:
        shared, spec = self.shared, self.spec
        summary = {
            "experiment": spec.get("experiment"), "algorithm_id": spec.get("algorithm_id"), "seed": self.seed,
            "spec": spec, "rounds_completed": len(self.rows), "diverged_at": self.diverged_at,
            "divergence": self.divergence,
            "inputs": {role: {"path": str(path), "sha256": sha256} for role, (path, sha256) in self.inputs.items()},
            "state_bytes": state_bytes(self.state) + state_bytes(self.local_state),
            "local_state_bytes": state_bytes(self.local_state), "dimension": shared.model.dim,
            "wall_seconds": self.elapsed(),
            "peak_memory_bytes": int(torch.cuda.max_memory_allocated(shared.device)) if shared.device.type == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "provenance": {"fedavail_version": __version__, "git_commit": git_commit(), "torch": torch.__version__,
                           "device": str(shared.device), "batched": shared.batched,
                           "python": sys.version.split()[0], "training_code_sha256": shared.code_sha256},
        }
        self.result = _write_metrics(self.paths, self.rows, summary)
        finished = {"fingerprint": self.fingerprint, "rows": self.rows, "summary": self.result}
        # Unsorted keys: the rows keep their column order.
        write_text(self.paths.finished, json.dumps({**finished, DIGEST: json_digest(finished)}, default=str))
        self.paths.checkpoint.unlink(missing_ok=True)


def _resumable(checkpoint: Checkpoint, fresh: dict[str, State], rounds: int, batched: bool, path: Path) -> bool:
    """Whether a checkpoint of this run's fingerprint can be resumed here. One saved on the other back end is left (the
    resumed run would match neither uninterrupted run); one whose rounds or tensors do not fit the run is set aside."""
    if checkpoint.batched != batched:
        log.warning("checkpoint %s was saved on the %s back end and this process runs the %s one: starting over",
                    path, *(("vmap", "loop") if checkpoint.batched else ("loop", "vmap")))
        return False
    layouts = [{group: {name: (t.shape, t.dtype) for name, t in named.items()} for group, named in tensors.items()}
               for tensors in (fresh, checkpoint.tensors)]
    if layouts[0] != layouts[1]:
        problem = "its tensors' names, shapes or dtypes are not this run's"
    elif not 0 < checkpoint.next_round < rounds or [row.get("round") for row in checkpoint.rows] != list(
            range(checkpoint.next_round)):
        problem = f"next round {checkpoint.next_round} with {len(checkpoint.rows)} rows in a run of {rounds} rounds"
    else:
        return True
    set_aside(path, problem)
    return False


def _train_rounds(runs: list[TrainingRun], rounds: int, checkpoint_every: int, stop_after_round: int | None) -> None:
    """The round loop: every unfinished run that has reached round t trains it; checkpoints on schedule and on a
    stop (after a round, or inside one, which is then discarded); a run's outputs are written when it ends."""
    started = time.perf_counter()
    for t in range(min(r.next_round for r in runs), rounds):
        if all(r.result is not None for r in runs):
            break
        active = [r for r in runs if r.result is None and r.next_round == t]
        try:
            _train_round(active, t)
        except stopping.StopRequested as stop:
            # The unfinished round is discarded: each checkpoint holds its run's state at the round's start.
            _stop(runs, f"in round {t} (signal {stop.signum}); the next run resumes at its start")
            return
        signum = stopping.requested()
        preempted = signum is not None or (stop_after_round is not None and t + 1 >= stop_after_round)
        if t + 1 < rounds and (preempted or (t + 1) % checkpoint_every == 0):
            for run in active:
                if run.result is None:
                    run.save()
            if preempted:
                _stop(runs, f"after round {t} ({f'signal {signum}' if signum else 'requested'}); the next run "
                            "resumes from the checkpoint", save=False)
                return
    # benchmarks/job_accounting.py reads this line: a job's time outside it is start-up, set-up and writing
    log.info("round loop: %.2f s", time.perf_counter() - started)
    for run in runs:
        if run.result is None:
            run.finish()


def _train_round(active: list[TrainingRun], t: int) -> None:
    """Round t of every active run: each chooses its participants, all train together, each aggregates and appends
    its metrics row (a run that diverged ends here)."""
    started = time.perf_counter()
    contexts = [run.context(t) for run in active]
    works = [LocalWork(run.trainer, *local_work(run.algorithm, run.state, ctx), run.local_state)
             for run, ctx in zip(active, contexts)]
    # The LR schedule is the runs' shared local setting: the round's lr travels in the context.
    results = train_together(works, t, contexts[0].lr)
    for run, ctx, work, result in zip(active, contexts, works, results):
        run.state, run.next_round = run.algorithm.aggregate(run.state, work.clients, result, ctx), t + 1
        if run.append_row(t, ctx, work.clients, result, started):
            run.finish()


def _clock(trace: Trace, sizes: np.ndarray, local: LocalOptions, parameters: int, where: str) -> Clock | None:
    """The run's clock (None: the trace has none), built once here; with replay fedscale, the replay it asks. A clock
    under which no client can ever take part is refused before the first round."""
    if trace.capacity is None:
        return None
    replay = None
    if trace.params.get("replay") == "fedscale":
        replay = FedScaleReplay.of_trace(trace.params, trace.sessions, sizes, where)
    clock = Clock(ClockOptions(**trace.params["clock"]), trace.capacity, sizes, local, parameters, replay)
    clock.check_someone_can_finish(where)
    return clock


def _stop(runs: list[TrainingRun], why: str, save: bool = True) -> None:
    for run in runs:
        if run.result is None:
            if save:
                run.save()
            run.result = {"stopped_at": run.next_round}
    log.warning("stopping %s", why)


def _train_eval_subset(dataset: dict, samples: int, seed: int) -> torch.Tensor:
    size = len(dataset["train_y"])
    if samples >= size:
        return torch.arange(size)
    chosen = numpy_generator(seed, "train-eval-subset").choice(size, samples, replace=False)
    return torch.from_numpy(chosen.copy()).sort().values


def _progress(first_round: int, rounds: int, label: str):
    """A tqdm bar on a terminal; otherwise one log line every `log_every` rounds (SLURM logs stay readable)."""
    if sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=rounds, initial=first_round, unit="round", desc=label.rstrip(": ") or None)

        def update(t, row, log_every):
            bar.update(1)
            if "test_acc" in row:
                bar.set_postfix(test_acc=f"{row['test_acc']:.3f}")
        return update

    def log_line(t, row, log_every):
        if (t + 1) % log_every == 0 or t + 1 == rounds:
            accuracy = f" test_acc={row['test_acc']:.4f}" if "test_acc" in row else ""
            log.info("%sround %d/%d participants=%d local_loss=%.4f%s", label, t + 1, rounds, row["participants"],
                     row["local_loss"], accuracy)
    return log_line
