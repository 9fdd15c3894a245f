"""One training run: determinism, bit-identical resume after preemption or SIGKILL, divergence recorded."""

import json
import logging
import math
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import torch
from synthetic import image_dataset, training_inputs

import fedavail.checkpoint as checkpoint_mod
from fedavail import divergence, integrity, stopping
from fedavail.availability.traces import make_trace, save_trace
from fedavail.engine.local import ClientTrainer
from fedavail.partitions.partition import make_partition, save_partition
from fedavail.train import Execution, run

SPEC = {
    "experiment": "unit", "algorithm_id": "fedavg_active", "seed": 0,
    "training": {"model": "small_cnn", "rounds": 12, "eval_every": 3, "last_n": 2, "train_eval_samples": 200, "augmentation": {},
                 "local": {"steps": 3, "batch_size": 16, "schedule": "sqrt_decay", "grad_clip": 0.5}},
    "algorithm": {"algorithm": "fedavg", "lr": 0.05, "weighting": "known"},
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("inputs")
    training_inputs(root)
    return root


def _run(inputs, out_dir, spec=SPEC, **kwargs):
    return run(inputs / "data.pt", inputs / "partition.npz", inputs / "trace.npz", out_dir, spec, **kwargs)


def _with(spec, **changes):
    spec = json.loads(json.dumps(spec))
    for dotted, value in changes.items():
        *path, key = dotted.split("__")
        target = spec
        for part in path:
            target = target[part]
        target[key] = value
    return spec


def test_same_seed_same_metrics_other_seed_differs(inputs, tmp_path):
    _run(inputs, tmp_path / "a")
    _run(inputs, tmp_path / "b")
    _run(inputs, tmp_path / "c", _with(SPEC, seed=1))
    a, b, c = (pd.read_parquet(tmp_path / name / "metrics.parquet") for name in "abc")
    pd.testing.assert_frame_equal(a.drop(columns="seconds"), b.drop(columns="seconds"))
    assert not a["test_acc"].dropna().equals(c["test_acc"].dropna())
    assert len(a) == 12 and a["test_acc"].notna().sum() == 6  # rounds 0, 3, 6, 9 and the last two (10, 11)
    summary = json.loads((tmp_path / "a/summary.json").read_text())
    assert summary["diverged_at"] is None and summary["provenance"]["torch"] == torch.__version__
    assert summary["state_bytes"] == summary["dimension"] * 4


def test_preempted_run_resumes_bit_identically(inputs, tmp_path):
    _run(inputs, tmp_path / "whole")
    stopped = _run(inputs, tmp_path / "split", execution=Execution(checkpoint_every=100), stop_after_round=5)
    assert stopped == {"stopped_at": 5}
    assert (tmp_path / "split/checkpoint.pt").exists() and not (tmp_path / "split/metrics.parquet").exists()
    _run(inputs, tmp_path / "split")
    whole = pd.read_parquet(tmp_path / "whole/metrics.parquet").drop(columns="seconds")
    split = pd.read_parquet(tmp_path / "split/metrics.parquet").drop(columns="seconds")
    pd.testing.assert_frame_equal(whole, split)
    assert not (tmp_path / "split/checkpoint.pt").exists()


def test_checkpoint_from_another_spec_is_not_resumed(inputs, tmp_path):
    _run(inputs, tmp_path / "run", stop_after_round=4)
    changed = _with(SPEC, algorithm__lr=0.02)
    _run(inputs, tmp_path / "run", changed)
    _run(inputs, tmp_path / "fresh", changed)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "run/metrics.parquet").drop(columns="seconds"),
                                  pd.read_parquet(tmp_path / "fresh/metrics.parquet").drop(columns="seconds"))


PERSISTENT = _with(SPEC, training__local={"optimizer": "adam", "lr": 1e-3, "optimizer_state": "persistent",
                                           "epochs": 1, "max_steps": 2, "batch_size": 16})


def test_persistent_optimizer_state_is_checkpointed_resumed_and_counted(inputs, tmp_path):
    _run(inputs, tmp_path / "whole", PERSISTENT)
    _run(inputs, tmp_path / "split", PERSISTENT, execution=Execution(checkpoint_every=100), stop_after_round=5)
    _run(inputs, tmp_path / "split", PERSISTENT)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "whole/metrics.parquet").drop(columns="seconds"),
                                  pd.read_parquet(tmp_path / "split/metrics.parquet").drop(columns="seconds"))
    summary = json.loads((tmp_path / "whole/summary.json").read_text())
    m, d = 10, summary["dimension"]
    # Adam's two [m, d] moment tables and its [m] float32 step counts, plus the [m] epoch cursor and running accuracy.
    assert summary["local_state_bytes"] == 2 * m * d * 4 + m * 4 + 4 * m * 8
    assert summary["state_bytes"] == d * 4 + summary["local_state_bytes"]


def test_scaffold_under_persistent_adam_resumes_bit_identically(inputs, tmp_path):
    # The c_i table and the Adam moments are both checkpointed; the mean gradients are per-round only.
    spec = _with(PERSISTENT, algorithm={"algorithm": "scaffold"}, algorithm_id="scaffold")
    _run(inputs, tmp_path / "whole", spec)
    _run(inputs, tmp_path / "split", spec, execution=Execution(checkpoint_every=100), stop_after_round=5)
    _run(inputs, tmp_path / "split", spec)
    whole = pd.read_parquet(tmp_path / "whole/metrics.parquet").drop(columns="seconds")
    pd.testing.assert_frame_equal(whole, pd.read_parquet(tmp_path / "split/metrics.parquet").drop(columns="seconds"))
    assert whole["test_acc"].notna().any()


def _train_command(inputs, *options, spec=SPEC):
    spec = _with(spec, training__rounds=150, training__eval_every=50)
    return [sys.executable, "-m", "fedavail", "train", "--prepared", str(inputs / "data.pt"),
            "--partition", str(inputs / "partition.npz"), "--trace", str(inputs / "trace.npz"),
            "--spec", json.dumps(spec), *options]


@pytest.mark.parametrize("spec", [SPEC, PERSISTENT], ids=["sgd", "adam-persistent"])
def test_sigkilled_job_resumes_to_the_same_result(inputs, tmp_path, spec):
    command = _train_command(inputs, "--checkpoint-every", "2", spec=spec)
    subprocess.run([*command, "--out-dir", str(tmp_path / "whole")], check=True, capture_output=True)
    victim = subprocess.Popen([*command, "--out-dir", str(tmp_path / "killed")], stderr=subprocess.DEVNULL)
    checkpoint = tmp_path / "killed/checkpoint.pt"
    deadline = time.monotonic() + 120
    while not checkpoint.exists() and victim.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(victim.pid, signal.SIGKILL)
    assert victim.wait() == -signal.SIGKILL, "the run ended before it could be killed"
    assert not (tmp_path / "killed/metrics.parquet").exists()
    subprocess.run([*command, "--out-dir", str(tmp_path / "killed")], check=True, capture_output=True)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "whole/metrics.parquet").drop(columns="seconds"),
                                  pd.read_parquet(tmp_path / "killed/metrics.parquet").drop(columns="seconds"))


def test_sigterm_checkpoints_and_exits_nonzero(inputs, tmp_path):
    command = _train_command(inputs, "--checkpoint-every", "1000", "--out-dir", str(tmp_path / "run"))
    victim = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    log = ""
    while "round 10/" not in log and victim.poll() is None:
        log += victim.stderr.readline()
    victim.send_signal(signal.SIGTERM)
    assert victim.wait() == 3
    assert (tmp_path / "run/checkpoint.pt").exists()


def test_divergence_is_recorded_not_raised(inputs, tmp_path):
    spec = _with(SPEC, algorithm__lr=1e12, training__local={"steps": 3, "batch_size": 16})
    summary = _run(inputs, tmp_path / "run", spec)
    assert summary["diverged_at"] is not None
    metrics = pd.read_parquet(tmp_path / "run/metrics.parquet")
    assert len(metrics) == summary["diverged_at"] + 1


def _frame(path):
    return pd.read_parquet(path / "metrics.parquet").drop(columns="seconds")


def test_checkpoint_is_not_resumed_after_an_input_changes(inputs, tmp_path):
    """Partition and trace regenerated with another α between the preemption and the rerun: start over."""
    _run(inputs, tmp_path / "run", stop_after_round=4)
    changed = tmp_path / "changed"
    changed.mkdir()
    (changed / "data.pt").write_bytes((inputs / "data.pt").read_bytes())
    dataset = image_dataset()
    partition = make_partition(dataset["train_y"].numpy(), 10,
                               {"scheme": "client_dirichlet", "num_clients": 10, "alpha": 0.3}, seed=0)
    save_partition(changed / "partition.npz", partition)
    save_trace(changed / "trace.npz", make_trace({"model": "fedswe", "dynamics": "sine"}, 10, 200, seed=0,
                                                 partition=partition))
    summary = _run(changed, tmp_path / "run")
    _run(changed, tmp_path / "fresh")
    pd.testing.assert_frame_equal(_frame(tmp_path / "run"), _frame(tmp_path / "fresh"))
    assert summary["inputs"]["partition"]["sha256"] == integrity.file_sha256(changed / "partition.npz")
    assert set(summary["inputs"]) == {"prepared", "partition", "trace"}


@pytest.mark.parametrize("damage", ["empty", "truncated", "pickle"])
def test_an_unreadable_checkpoint_is_set_aside_and_the_run_restarts(inputs, tmp_path, damage):
    _run(inputs, tmp_path / "whole")
    _run(inputs, tmp_path / "run", stop_after_round=4)
    checkpoint = tmp_path / "run/checkpoint.pt"
    marker = tmp_path / "pwned"
    if damage == "pickle":
        torch.save({"meta": _Payload(marker)}, checkpoint)
    else:
        with open(checkpoint, "r+b") as f:
            f.truncate(0 if damage == "empty" else 500)
    _run(inputs, tmp_path / "run")
    pd.testing.assert_frame_equal(_frame(tmp_path / "run"), _frame(tmp_path / "whole"))
    assert (tmp_path / "run/checkpoint.pt.unreadable").exists() and not marker.exists()


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_resume_keeps_the_checkpoints_thread_count(inputs, tmp_path, caplog):
    _run(inputs, tmp_path / "whole", execution=Execution(threads=1))
    _run(inputs, tmp_path / "run", execution=Execution(threads=1), stop_after_round=4)
    try:
        with caplog.at_level(logging.WARNING, logger="fedavail.train"):
            _run(inputs, tmp_path / "run", execution=Execution(threads=2))
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(1)
    assert "keeping the checkpoint's 1 threads (asked for 2)" in caplog.text
    pd.testing.assert_frame_equal(_frame(tmp_path / "run"), _frame(tmp_path / "whole"))


def test_temporary_files_of_a_killed_run_are_removed(inputs, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    left = [run_dir / ".checkpoint.pt.k1ll3d.tmp", run_dir / ".metrics.parquet.x0x0x0.tmp"]
    for path in left:
        path.write_bytes(b"half written")
    _run(inputs, run_dir, _with(SPEC, training__rounds=2, training__last_n=1))
    assert not any(path.exists() for path in left) and (run_dir / "metrics.parquet").exists()


@pytest.mark.parametrize("spec", [SPEC, PERSISTENT], ids=["sgd", "adam-persistent"])
def test_a_stop_inside_a_round_discards_it_and_resumes_at_its_start(inputs, tmp_path, monkeypatch, spec):
    # With persistent optimizer state and epoch cursors, the discarded round must leave them as they were too.
    _run(inputs, tmp_path / "whole", spec)
    real = ClientTrainer.plan

    def stop_in_round_2(self, client, round_index, state):
        if round_index == 2:  # request the stop as a signal would, then let training notice it
            stopping.request(signal.SIGTERM)
        return real(self, client, round_index, state)

    monkeypatch.setattr(ClientTrainer, "plan", stop_in_round_2)
    assert _run(inputs, tmp_path / "run", spec) == {"stopped_at": 2}
    monkeypatch.setattr(ClientTrainer, "plan", real)
    _run(inputs, tmp_path / "run", spec)
    pd.testing.assert_frame_equal(_frame(tmp_path / "run"), _frame(tmp_path / "whole"))


def test_sigterm_does_not_wait_for_the_end_of_a_long_round(inputs, tmp_path):
    spec = _with(SPEC, training__rounds=3, training__local={"steps": 1_000_000, "batch_size": 16}, training__last_n=1)
    command = [sys.executable, "-m", "fedavail", "train", "--prepared", str(inputs / "data.pt"),
               "--partition", str(inputs / "partition.npz"), "--trace", str(inputs / "trace.npz"),
               "--spec", json.dumps(spec), "--out-dir", str(tmp_path / "run")]
    victim = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    log = ""
    while "start: fresh" not in log and victim.poll() is None:
        log += victim.stderr.readline()
    time.sleep(1)
    victim.send_signal(signal.SIGTERM)
    try:
        assert victim.wait(timeout=120) == 3
    finally:
        victim.kill()
    meta = json.loads(torch.load(tmp_path / "run/checkpoint.pt", weights_only=True)["meta"])
    assert meta["next_round"] == 0 and meta["rows"] == []


def test_an_exploding_loss_is_divergence_even_with_finite_weights(inputs, tmp_path):
    spec = _with(SPEC, algorithm__lr=1e6)  # grad_clip 0.5 keeps the weights finite
    summary = _run(inputs, tmp_path / "run", spec)
    assert summary["diverged_at"] is not None and "mean local loss" in summary["divergence"]
    metrics = pd.read_parquet(tmp_path / "run/metrics.parquet")
    assert len(metrics) == summary["diverged_at"] + 1
    assert metrics["local_loss"].iloc[-1] > divergence.loss_limit(10)


def test_the_log_opens_with_a_run_header(inputs, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="fedavail.train"):
        _run(inputs, tmp_path / "run", stop_after_round=2)
        _run(inputs, tmp_path / "run")
    text = caplog.text
    assert "run spec: " + json.dumps(SPEC, sort_keys=True) in text
    for role, name in (("prepared", "data.pt"), ("partition", "partition.npz"), ("trace", "trace.npz")):
        assert f"input {role}: {inputs / name} sha256={integrity.file_sha256(inputs / name)}" in text
    assert "device=cpu threads=1 batched=True" in text  # auto: vmap for small_cnn at batch 16 (engine.backend)
    assert "start: fresh, round 0" in text and "start: resuming at round 2" in text


def test_checkpoints_hold_named_groups_of_tensors(tmp_path):
    groups = {"algorithm": {"x": torch.arange(4.0)}, "local": {"momentum": torch.ones(3, 2, dtype=torch.float64)}}
    rows = [{"round": 0, "local_loss": float("nan"), "test_acc": 0.25}]
    checkpoint_mod.save_checkpoint(tmp_path / "c.pt", fingerprint="f", tensors=groups, rows=rows, next_round=1,
                                   elapsed=2.5, threads=3, batched=True)
    loaded = checkpoint_mod.load_checkpoint(tmp_path / "c.pt", "f", torch.device("cpu"))
    assert set(loaded.tensors) == {"algorithm", "local"} and torch.equal(loaded.tensors["local"]["momentum"],
                                                                        groups["local"]["momentum"])
    assert loaded.rows[0]["test_acc"] == 0.25 and math.isnan(loaded.rows[0]["local_loss"])
    assert (loaded.next_round, loaded.elapsed, loaded.threads, loaded.batched) == (1, 2.5, 3, True)
    assert checkpoint_mod.load_checkpoint(tmp_path / "c.pt", "other", torch.device("cpu")) is None
    assert (tmp_path / "c.pt").exists()  # another fingerprint's checkpoint is ignored, not set aside


def _flip_one_bit_of_a_tensor(path):
    """Flip one bit inside the stored bytes of the model vector x (a member of the checkpoint's zip archive)."""
    import struct
    import zipfile

    with zipfile.ZipFile(path) as archive:
        member = max(archive.infolist(), key=lambda info: info.file_size)  # x: the largest tensor
    data = bytearray(path.read_bytes())
    name_length, extra_length = struct.unpack("<HH", data[member.header_offset + 26:member.header_offset + 30])
    data[member.header_offset + 30 + name_length + extra_length + 100] ^= 0x01  # stored uncompressed
    path.write_bytes(bytes(data))


def _edit_checkpoint(path, edit):
    """Change a saved checkpoint as a person would with torch.load/torch.save, leaving its digest as it was."""
    raw = torch.load(path, weights_only=True)
    edit(raw)
    torch.save(raw, path)


def _add_to_x(raw):
    raw["tensors"]["algorithm"]["x"] += 0.01


def _skip_rounds(raw):
    meta = json.loads(raw["meta"])
    meta["next_round"] = 8
    raw["meta"] = json.dumps(meta)


@pytest.mark.parametrize("tamper", ["flipped bit", "edited x", "edited next_round"])
def test_a_tampered_checkpoint_is_set_aside_and_the_run_restarts(inputs, tmp_path, tamper):
    _run(inputs, tmp_path / "whole")
    _run(inputs, tmp_path / "run", stop_after_round=4)
    checkpoint = tmp_path / "run/checkpoint.pt"
    if tamper == "flipped bit":
        _flip_one_bit_of_a_tensor(checkpoint)
    else:
        _edit_checkpoint(checkpoint, _add_to_x if tamper == "edited x" else _skip_rounds)
    _run(inputs, tmp_path / "run")
    assert (tmp_path / "run/checkpoint.pt.unreadable").exists()
    pd.testing.assert_frame_equal(_frame(tmp_path / "run"), _frame(tmp_path / "whole"))


def test_a_checkpoint_of_the_wrong_shape_is_set_aside_not_a_crash_on_every_rerun(inputs, tmp_path):
    _run(inputs, tmp_path / "whole")
    _run(inputs, tmp_path / "run", stop_after_round=4)
    checkpoint = tmp_path / "run/checkpoint.pt"
    loaded = checkpoint_mod.load_checkpoint(checkpoint, "", torch.device("cpu"))  # other fingerprint: not used
    raw = torch.load(checkpoint, weights_only=True)
    meta = json.loads(raw["meta"])
    tensors = raw["tensors"]
    tensors["algorithm"]["x"] = tensors["algorithm"]["x"][:-1]
    checkpoint_mod.save_checkpoint(checkpoint, fingerprint=meta["fingerprint"], tensors=tensors, rows=meta["rows"],
                                   next_round=meta["next_round"], elapsed=meta["elapsed"], threads=meta["threads"],
                                   batched=meta["batched"])
    assert loaded is None
    _run(inputs, tmp_path / "run")
    assert (tmp_path / "run/checkpoint.pt.unreadable").exists()
    pd.testing.assert_frame_equal(_frame(tmp_path / "run"), _frame(tmp_path / "whole"))


def test_a_checkpoint_of_the_other_back_end_is_not_resumed(inputs, tmp_path, caplog):
    _run(inputs, tmp_path / "whole", execution=Execution(batched=True))
    _run(inputs, tmp_path / "run", execution=Execution(batched=False), stop_after_round=4)
    with caplog.at_level(logging.WARNING, logger="fedavail.train"):
        _run(inputs, tmp_path / "run", execution=Execution(batched=True))
    assert "saved on the loop back end and this process runs the vmap one: starting over" in caplog.text
    pd.testing.assert_frame_equal(_frame(tmp_path / "run"), _frame(tmp_path / "whole"))


def _edit_finished(path, edit):
    finished = json.loads(path.read_text())
    path.write_text(json.dumps(edit(finished)))


def _raise_accuracy(finished):
    for row in finished["rows"]:
        if "test_acc" in row:
            row["test_acc"] += 0.2
    return finished


@pytest.mark.parametrize("edit", [
    _raise_accuracy,
    lambda r: {**r, "rows": r["rows"][:5]},
    lambda r: {**r, "summary": {**r["summary"], "seed": 7}},
    lambda r: {k: v for k, v in r.items() if k != "rows"},
    lambda r: [r],
], ids=["metric+0.2", "rows cut to 5", "seed 7", "no rows", "a list"])
def test_an_edited_finished_json_is_set_aside_and_the_seed_recomputed(inputs, tmp_path, edit):
    _run(inputs, tmp_path / "whole")
    _run(inputs, tmp_path / "run")
    _edit_finished(tmp_path / "run/finished.json", edit)
    (tmp_path / "run/metrics.parquet").unlink()  # as Snakemake does before it reruns the job
    (tmp_path / "run/summary.json").unlink()
    _run(inputs, tmp_path / "run")
    assert (tmp_path / "run/finished.json.invalid").exists()
    pd.testing.assert_frame_equal(_frame(tmp_path / "run"), _frame(tmp_path / "whole"))


def test_a_valid_finished_json_is_restored_without_training(inputs, tmp_path, caplog):
    _run(inputs, tmp_path / "run")
    before = _frame(tmp_path / "run")
    (tmp_path / "run/metrics.parquet").unlink()
    with caplog.at_level(logging.INFO, logger="fedavail.train"):
        summary = _run(inputs, tmp_path / "run")
    assert "outputs rewritten from" in caplog.text and "start: fresh" not in caplog.text
    pd.testing.assert_frame_equal(_frame(tmp_path / "run"), before)
    assert summary == json.loads((tmp_path / "run/summary.json").read_text())


def _copy_run(source, destination):
    destination.mkdir(parents=True)
    for name in ("summary.json", "metrics.parquet"):
        (destination / name).write_bytes((source / name).read_bytes())


def test_a_runs_outputs_are_checked_against_the_run_they_claim_to_be(inputs, tmp_path):
    """What the workflow treats as damaged (fedavail.integrity): seed 0's outputs copied into seed 1's folder, an
    empty summary, an edited metric, a sealed summary without its run's spec, a summary without its metrics."""
    seed0 = tmp_path / "results/runs/unit/fedavg_active/seed0"
    _run(inputs, seed0)
    assert integrity.run_problem(seed0) is None and integrity.damage(seed0 / "summary.json") is None
    _copy_run(seed0, tmp_path / "results/runs/unit/fedavg_active/seed1")
    assert "is the summary of unit/fedavg_active/seed0" in integrity.run_problem(seed0.parent / "seed1")
    edited = tmp_path / "results/runs/unit/fedavg_active/seed2"
    _copy_run(seed0, edited)
    frame = pd.read_parquet(edited / "metrics.parquet")
    frame["test_acc"] += 0.2
    frame.to_parquet(edited / "metrics.parquet", index=False)
    summary = json.loads((edited / "summary.json").read_text())
    (edited / "summary.json").write_text(json.dumps({**summary, "seed": 2}))
    assert "digest mismatch" in integrity.run_problem(edited)
    (edited / "summary.json").write_text("{}")
    assert "is the summary of None/None/seedNone" in integrity.damage(edited / "summary.json")
    without_spec = {k: v for k, v in summary.items() if k not in ("spec", integrity.DIGEST)}
    _copy_run(seed0, edited.parent / "seed3")
    (edited.parent / "seed3/summary.json").write_text(json.dumps(integrity.seal_summary(
        {**without_spec, "seed": 3}, edited.parent / "seed3/metrics.parquet")))
    assert "does not carry its run's spec" in integrity.run_problem(edited.parent / "seed3")
    (seed0 / "metrics.parquet").unlink()
    assert "FileNotFoundError" in integrity.run_problem(seed0)
