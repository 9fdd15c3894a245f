"""One training run: load the prepared data, partition and trace; build model and algorithm; loop rounds; evaluate;
checkpoint; write per-round metrics (parquet) and a summary with provenance (JSON)."""

import hashlib
import logging
import math
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from fedavail import __version__, stopping
from fedavail.algorithms import build_algorithm
from fedavail.algorithms.base import RoundContext, run_round, state_bytes
from fedavail.availability.traces import load_trace
from fedavail.checkpoint import load_checkpoint, save_checkpoint
from fedavail.data.partition import load_partition
from fedavail.data.prepared import load_prepared
from fedavail.divergence import divergence
from fedavail.engine.client_data import Augmentation, ClientData
from fedavail.engine.evaluate import evaluate
from fedavail.engine.local import LocalTrainer, vmap_supported
from fedavail.engine.params import FlatModel
from fedavail.io import atomic_path, remove_temporaries, write_json
from fedavail.models import build_model
from fedavail.plan.local import resolve_local
from fedavail.plan.sources import TRAINING_SOURCES
from fedavail.provenance import input_hashes, log_run_header, run_fingerprint
from fedavail.rng import numpy_generator, torch_generator

log = logging.getLogger("fedavail.train")


def training_code_hash() -> str:
    """A hash of the source files that determine a run's numbers (checkpoints from other code are not resumed)."""
    root = Path(__file__).parent
    digest = hashlib.sha256()
    for entry in TRAINING_SOURCES:
        for path in sorted((root / entry).rglob("*.py")) if (root / entry).is_dir() else [root / entry]:
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def evaluation_due(round_index: int, rounds: int, eval_every: int, last_n: int) -> bool:
    return round_index % eval_every == 0 or round_index >= rounds - last_n


def pick_device(requested: str) -> torch.device:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(requested)


@dataclass
class RunPaths:
    out_dir: Path

    @property
    def metrics(self) -> Path:
        return self.out_dir / "metrics.parquet"

    @property
    def summary(self) -> Path:
        return self.out_dir / "summary.json"

    @property
    def checkpoint(self) -> Path:
        return self.out_dir / "checkpoint.pt"


def git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


@dataclass
class Execution:
    """Where and how a run executes: none of it changes what the run computes (beyond float reassociation)."""

    threads: int = 1
    device: str = "auto"
    batched: str | bool = "auto"
    checkpoint_every: int = 50
    log_every: int = 10


def run(prepared_path: Path, partition_path: Path, trace_path: Path, out_dir: Path, spec: dict,
        execution: Execution = Execution(), stop_after_round: int | None = None) -> dict:
    """Run (or resume) one training run described by `spec` = {seed, training: {..., local: {...}}, algorithm: {...}}
(fedavail.config.run_spec resolves the local optimisation block; an algorithm's own lr overrides its lr).

    `stop_after_round` ends the run early as if preempted (tests use it to check resume)."""
    started = time.perf_counter()
    paths = RunPaths(Path(out_dir))
    seed = int(spec["seed"])
    training = spec["training"]
    algorithm_spec = dict(spec["algorithm"])
    algorithm_name = algorithm_spec.pop("algorithm")
    options = resolve_local(training.get("local"), algorithm_spec.pop("lr", None), "training.local")
    algorithm = build_algorithm(algorithm_name, algorithm_spec)

    stopping.install()
    remove_temporaries(paths.out_dir)
    inputs = {"prepared": Path(prepared_path), "partition": Path(partition_path), "trace": Path(trace_path)}
    inputs_sha256 = input_hashes(inputs)
    device = pick_device(execution.device)
    fingerprint = run_fingerprint(spec, training_code_hash(), inputs_sha256)
    checkpoint = load_checkpoint(paths.checkpoint, fingerprint, device)
    threads = execution.threads if checkpoint is None else checkpoint.threads
    if threads != execution.threads:
        log.warning("keeping the checkpoint's %d threads (asked for %d): other thread counts reassociate float sums "
                    "and the resumed run would match neither uninterrupted run", threads, execution.threads)
    torch.set_num_threads(threads)
    dataset = load_prepared(prepared_path)
    partition = load_partition(partition_path)
    trace = load_trace(trace_path)
    rounds = int(training["rounds"])
    if trace.available.shape[0] < rounds:
        raise ValueError(f"trace {trace_path} has {trace.available.shape[0]} rounds, the run needs {rounds}")
    if trace.available.shape[1] != partition.num_clients:
        raise ValueError(f"trace {trace_path} has {trace.available.shape[1]} clients, "
                         f"partition {partition_path} has {partition.num_clients}")

    module = build_model(training["model"], dataset, seed)
    model = FlatModel(module).to(device)
    augmentation = Augmentation(**training.get("augmentation", {}))
    data = ClientData(dataset, partition.offsets, partition.indices, device, augmentation)
    test_x, test_y = dataset["test_x"].to(device), dataset["test_y"].to(device)
    train_eval = _train_eval_subset(dataset, int(training.get("train_eval_samples", 2000)), seed)
    train_eval_x, train_eval_y = dataset["train_x"][train_eval].to(device), dataset["train_y"][train_eval].to(device)

    batched = (device.type == "cuda") if execution.batched == "auto" else bool(execution.batched)
    if batched and not vmap_supported(model):
        log.info("model %s cannot be batched with vmap (LSTM); using the per-client loop", training["model"])
        batched = False
    trainer = LocalTrainer(model, data, options, seed, batched)

    log_run_header(log, spec=spec, inputs=inputs, inputs_sha256=inputs_sha256, device=device, threads=threads,
                   batched=batched, resume_round=None if checkpoint is None else checkpoint.next_round)
    if checkpoint is None:
        x0 = model.flatten().to(device)
        state = algorithm.init_state(x0, data.client_sizes().to(device))
        local_state = trainer.init_state(partition.num_clients, x0.dtype, device)
        rows, first_round, elapsed_before = [], 0, 0.0
    else:
        state, local_state, rows = checkpoint.tensors["algorithm"], checkpoint.tensors["local"], checkpoint.rows
        first_round, elapsed_before = checkpoint.next_round, checkpoint.elapsed

    def local_train(clients, starts, correction, ctx):
        return trainer.train(clients, starts, correction, ctx.round, ctx.lr, local_state)

    def save(next_round, rows_so_far):
        save_checkpoint(paths.checkpoint, fingerprint=fingerprint, tensors={"algorithm": state, "local": local_state},
                        rows=rows_so_far, next_round=next_round,
                        elapsed=elapsed_before + time.perf_counter() - started, threads=threads)

    eval_every, last_n = int(training["eval_every"]), int(training["last_n"])
    checkpoint_every, log_every = execution.checkpoint_every, execution.log_every
    diverged_at = divergence_reason = None
    progress = _progress(first_round, rounds)

    for t in range(first_round, rounds):
        round_started = time.perf_counter()
        ctx = RoundContext(
            round=t,
            available=torch.from_numpy(trace.available[t]).to(device),
            prob=None if trace.prob is None else torch.from_numpy(trace.prob[t]).to(device),
            snapshot=None if trace.snapshot is None else torch.from_numpy(trace.snapshot[t]).to(device),
            lr=options.lr_at(t),
            generator=torch_generator(seed, "algorithm", t),
        )
        try:
            next_state, clients, result = run_round(algorithm, state, ctx, local_train)
        except stopping.StopRequested as stop:
            # The unfinished round is discarded: the checkpoint holds the state at its start.
            save(t, rows)
            log.warning("stopping in round %d (signal %d); the next run resumes at its start", t, stop.signum)
            return {"stopped_at": t}
        state = next_state

        row = {"round": t, "participants": len(clients), "lr": ctx.lr,
               "local_loss": result.loss.mean().item() if len(clients) else math.nan,
               "local_acc": result.accuracy.mean().item() if len(clients) else math.nan}
        row.update(algorithm.round_metrics(state))
        models = algorithm.eval_models(state)
        divergence_reason = divergence(models, row["local_loss"], len(clients), int(dataset["num_classes"]))
        if divergence_reason:
            diverged_at = t
            log.warning("diverged at round %d (%s); stopping the run", t, divergence_reason)
            row["seconds"] = time.perf_counter() - round_started
            rows.append(row)
            break
        if evaluation_due(t, rounds, eval_every, last_n):
            for name, weights in models.items():
                suffix = "" if name == "global" else f"_{name}"
                row[f"test_loss{suffix}"], row[f"test_acc{suffix}"] = evaluate(
                    model, weights, test_x, test_y, data.inputs)
                row[f"train_loss{suffix}"], row[f"train_acc{suffix}"] = evaluate(
                    model, weights, train_eval_x, train_eval_y, data.inputs)
        row["seconds"] = time.perf_counter() - round_started
        rows.append(row)
        progress(t, row, log_every)

        done = t + 1
        signum = stopping.requested()
        preempted = signum is not None or (stop_after_round is not None and done >= stop_after_round)
        if done < rounds and (done % checkpoint_every == 0 or preempted):
            save(done, rows)
        if preempted and done < rounds:
            log.warning("stopping after round %d (%s); the next run resumes from the checkpoint", t,
                        f"signal {signum}" if signum else "requested")
            return {"stopped_at": done}

    metrics = pd.DataFrame(rows)
    with atomic_path(paths.metrics) as tmp:
        metrics.to_parquet(tmp, index=False)
    summary = {
        "experiment": spec.get("experiment"), "algorithm_id": spec.get("algorithm_id"), "seed": seed,
        "spec": spec, "rounds_completed": len(rows), "diverged_at": diverged_at, "divergence": divergence_reason,
        "inputs": {role: {"path": str(path), "sha256": inputs_sha256[role]} for role, path in inputs.items()},
        "state_bytes": state_bytes(state) + state_bytes(local_state),
        "local_state_bytes": state_bytes(local_state), "dimension": model.dim,
        "wall_seconds": elapsed_before + time.perf_counter() - started,
        "peak_memory_bytes": _peak_memory(device),
        "provenance": {"fedavail_version": __version__, "git_commit": git_commit(), "torch": torch.__version__,
                       "device": str(device), "batched": batched, "python": sys.version.split()[0],
                       "training_code_sha256": training_code_hash()},
    }
    write_json(paths.summary, summary)
    paths.checkpoint.unlink(missing_ok=True)
    return summary


def _train_eval_subset(dataset: dict, samples: int, seed: int) -> torch.Tensor:
    size = len(dataset["train_y"])
    if samples >= size:
        return torch.arange(size)
    chosen = numpy_generator(seed, "train-eval-subset").choice(size, samples, replace=False)
    return torch.from_numpy(chosen.copy()).sort().values


def _peak_memory(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _progress(first_round: int, rounds: int):
    """A tqdm bar on a terminal; otherwise one log line every `log_every` rounds (SLURM logs stay readable)."""
    if sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=rounds, initial=first_round, unit="round")

        def update(t, row, log_every):
            bar.update(1)
            if "test_acc" in row:
                bar.set_postfix(test_acc=f"{row['test_acc']:.3f}")
        return update

    def log_line(t, row, log_every):
        if (t + 1) % log_every == 0 or t + 1 == rounds:
            accuracy = f" test_acc={row['test_acc']:.4f}" if "test_acc" in row else ""
            log.info("round %d/%d participants=%d local_loss=%.4f%s", t + 1, rounds, row["participants"],
                     row["local_loss"], accuracy)
    return log_line
