"""Recorded availability and the virtual clock, wired into the workflow: the `recorded` trace model's mapping of a
record onto clients and rounds (checked by hand), the clock's round durations and deadline in a training run
(checked by hand), time to a target accuracy in reports and claims, the trace statistics, and config/recorded.yaml
end to end at the tests' size."""

import json
import os
import pickle
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from fedavail.availability.clock import completion_seconds, samples_this_round
from fedavail.availability.trace_models import resolve_trace
from fedavail.availability.device_records import OnlineRecord, RecordError
from fedavail.availability.replay import FedScaleReplay
from fedavail.availability.traces import load_trace, make_trace, save_trace, session_rounds
from fedavail.partitions.partition import load_partition, make_partition, save_partition
from fedavail.plan.claim_parsing import parse_cell
from fedavail.plan.errors import ConfigError
from fedavail.plan.load import load_config, validate
from fedavail.plan.plan import build_plan
from fedavail.report import frame as tidy
from fedavail.rng import numpy_generator
from fedavail.train import run

from synthetic import image_dataset, training_inputs
from test_train import SPEC
from tiny_run import planned_jobs
from workflow_helpers import REPO, copy_workflow, snakemake


def write_intervals(path, rows, period=None) -> str:
    """An interval table of (client, start_s, end_s) rows; with `period`, every client's repeats with it."""
    extra = ("", "") if period is None else (",period_s", f",{period}")
    path.write_text(f"client,start_s,end_s{extra[0]}\n" + "".join(f"{c},{s},{e}{extra[1]}\n" for c, s, e in rows))
    return str(path)


def test_a_recorded_trace_maps_record_clients_and_wall_time_onto_rounds_as_by_hand(tmp_path):
    # Rounds of 10 s from t = 0: record client "a" is online over [0, 25), "b" over [5, 40), "c" never in [0, 40).
    record = write_intervals(tmp_path / "online.csv", [("a", 0, 25), ("b", 5, 40), ("c", 100, 110)])
    spec = {"model": "recorded", "availability": record, "round_seconds": 10}
    trace = make_trace(spec, num_clients=3, rounds=4, seed=0)
    online = {"a": [1, 1, 0, 0], "b": [0, 1, 1, 1], "c": [0, 0, 0, 0]}  # whole rounds online
    expected = np.array([online[client] for client in trace.params["record_clients"]], dtype=bool).T
    np.testing.assert_array_equal(trace.available, expected)
    assert sorted(trace.params["record_clients"]) == ["a", "b", "c"]  # drawn without repetition
    np.testing.assert_allclose(trace.prob, np.broadcast_to(expected.mean(axis=0), (4, 3)))  # each client's rate
    # Half of a round is enough with min_online_share 0.5: "a" also in round 2 ([20, 30): 5 s), "b" in round 0
    half = make_trace({**spec, "min_online_share": 0.5}, num_clients=3, rounds=4, seed=0)
    online = {"a": [1, 1, 1, 0], "b": [1, 1, 1, 1], "c": [0, 0, 0, 0]}
    np.testing.assert_array_equal(half.available,
                                  np.array([online[c] for c in half.params["record_clients"]], dtype=bool).T)
    # start_s shifts the windows: from t = 20, "a" is online for none of [20, 30) in full
    late = make_trace({**spec, "start_s": 20}, num_clients=3, rounds=2, seed=0)
    assert not late.available[:, late.params["record_clients"].index("a")].any()


def test_the_client_draw_is_seeded_and_a_short_record_is_refused_or_repeated(tmp_path):
    record = write_intervals(tmp_path / "online.csv", [(c, 0, 10) for c in "abcd"])
    spec = {"model": "recorded", "availability": record, "round_seconds": 5}
    assert make_trace(spec, 4, 2, seed=0).params == make_trace(spec, 4, 2, seed=0).params
    assert any(make_trace(spec, 4, 2, seed=s).params["record_clients"] != make_trace(spec, 4, 2, seed=0).params[
        "record_clients"] for s in range(1, 5))
    with pytest.raises(ValueError, match=r"online\.csv.*4.*6"):
        make_trace(spec, 6, 2, seed=0)
    repeated = make_trace({**spec, "repeat_clients": True}, 6, 2, seed=0).params["record_clients"]
    assert sorted(set(repeated)) == list("abcd") and max(repeated.count(c) for c in "abcd") == 2


def test_a_fedscale_record_repeats_with_its_finish_time(tmp_path):
    path = tmp_path / "client_behave_trace"
    path.write_bytes(pickle.dumps({1: {"duration": 20, "active": [0], "inactive": [20], "finish_time": 30,
                                       "model": "phone"}}))
    trace = make_trace({"model": "recorded", "availability": str(path), "round_seconds": 10}, 1, 6, seed=0)
    np.testing.assert_array_equal(trace.available[:, 0], [1, 1, 0, 1, 1, 0])  # period 30 s: on, on, off, ...


def test_a_foreign_or_damaged_record_is_an_error_naming_the_file(tmp_path):
    foreign = tmp_path / "record.pkl"
    foreign.write_bytes(pickle.dumps({1: pd.Timestamp(0)}))
    with pytest.raises(RecordError, match=str(foreign)):
        make_trace({"model": "recorded", "availability": str(foreign), "round_seconds": 10}, 1, 2, seed=0)
    table = tmp_path / "record.csv"
    table.write_text("client,start\n1,0\n")
    with pytest.raises(RecordError, match=rf"{table}.*end_s"):
        make_trace({"model": "recorded", "availability": str(table), "round_seconds": 10}, 1, 2, seed=0)


@pytest.mark.parametrize("spec, message", [
    ({"round_seconds": 0}, r"'round_seconds' must be a number > 0"),
    ({"round_seconds": 10, "min_online_share": 0}, r"'min_online_share' must be in \(0, 1\]"),
    ({"round_seconds": 10, "clock": {"deadline": 3}}, r"'deadline' is not used by the clock"),
    ({"round_seconds": 10, "clock": {"deadline_s": -1}}, r"'deadline_s' must be a number > 0"),
    ({"round_seconds": 10, "clock": {"sigma": -1}}, r"'sigma' must be a number in \[0, 3\]"),
    ({"round_seconds": 10, "clock": {"communication_kbps": 1e-300}}, r"'communication_kbps' must be a number in"),
    ({"round_seconds": 10, "participants": 5}, r"'participants' belongs to replay 'fedscale'"),
    ({"round_seconds": 10, "replay": "fedscale"}, r"'clock': replay 'fedscale' reads the record where each run's"),
    ({"round_seconds": 10, "replay": "fedscale", "clock": {}, "min_online_share": 1},
     r"'min_online_share' belongs to replay 'window'"),
    ({"round_seconds": 10, "replay": "fedscale", "clock": {}, "overcommitment": 0.5},
     r"'overcommitment' must be a number >= 1"),
    ({"round_seconds": 10, "replay": "interval"}, r"'replay' must be one of \('window', 'fedscale'\), got 'interval'"),
])
def test_recorded_and_clock_settings_are_checked(spec, message):
    with pytest.raises(ValueError, match=message):
        resolve_trace({"model": "recorded", "availability": "a.csv", **spec})


def test_the_clock_takes_capacities_from_a_record_or_a_stated_law_and_stores_them(tmp_path):
    capacity = tmp_path / "capacity.csv"
    capacity.write_text("client,computation_ms,communication_kbps\nx,100,1000\ny,50,2000\n")
    spec = {"model": "bernoulli", "p": 0.5, "clock": {"capacity": str(capacity)}}
    trace = make_trace(spec, num_clients=5, rounds=3, seed=0)
    table = {"x": (100.0, 1000.0), "y": (50.0, 2000.0)}
    np.testing.assert_array_equal(trace.capacity.T, [table[c] for c in trace.params["capacity_clients"]])
    save_trace(tmp_path / "t.npz", trace)
    np.testing.assert_array_equal(load_trace(tmp_path / "t.npz").capacity, trace.capacity)
    # The bernoulli draw is the same with or without a clock (the clock has its own stream)
    np.testing.assert_array_equal(make_trace({"model": "bernoulli", "p": 0.5}, 5, 3, seed=0).available,
                                  trace.available)
    stated = make_trace({"model": "bernoulli", "p": 0.5, "clock": {"computation_ms": 80, "communication_kbps": 400}},
                        5, 3, seed=0)
    np.testing.assert_array_equal(stated.capacity, [[80.0] * 5, [400.0] * 5])  # sigma 0: every client alike
    spread = make_trace({"model": "bernoulli", "p": 0.5, "clock": {"sigma": 0.5}}, 500, 3, seed=0).capacity
    assert np.median(spread[0]) == pytest.approx(100, rel=0.1) and np.std(np.log(spread[0])) == pytest.approx(0.5,
                                                                                                              rel=0.1)


def test_a_rounds_device_time_by_hand():
    # 80 samples at 100 ms each, ×3 for the backward pass: 24 s; 10,000 float32 parameters = 320 kbit, down and up
    # at 1,000 kbit/s: 0.64 s
    capacity = np.array([[100.0, 50.0], [1000.0, 2000.0]])
    np.testing.assert_allclose(completion_seconds(capacity, np.array([80.0, 80.0]), 10_000), [24.64, 12.32])


def test_a_run_under_a_clock_records_each_rounds_virtual_time_and_leaves_out_late_clients(tmp_path):
    training_inputs(tmp_path)
    trace = load_trace(tmp_path / "trace.npz")
    computation_ms = np.linspace(10.0, 100.0, 10)  # client i: 10 + 10 i ms per sample
    trace.capacity = np.stack([computation_ms, np.full(10, 1000.0)])
    deadline = 12.0
    trace.params["clock"] = {"capacity": None, "computation_ms": 100.0, "communication_kbps": 1000.0, "sigma": 0.0,
                             "deadline_s": deadline}
    save_trace(tmp_path / "trace.npz", trace)
    spec = json.loads(json.dumps(SPEC))
    spec["algorithm"] = {"algorithm": "fedavg", "lr": 0.05, "weighting": "active"}
    summary = run(tmp_path / "data.pt", tmp_path / "partition.npz", tmp_path / "trace.npz", tmp_path / "run", spec)
    metrics = pd.read_parquet(tmp_path / "run/metrics.parquet")
    dimension = summary["dimension"]
    local = spec["training"]["local"]
    needs = 3 * local["steps"] * local["batch_size"] * computation_ms / 1000 + 2 * dimension * 32 / 1000 / 1000
    on_time = needs <= deadline
    assert 0 < on_time.sum() < 10  # the deadline leaves some clients out
    durations, late = [], []
    for t in range(spec["training"]["rounds"]):
        participants = trace.available[t] & on_time  # FedAvg over active clients: every available, on-time client
        durations.append(needs[participants].max() if participants.any() else 0.0)
        late.append(int((trace.available[t] & ~on_time).sum()))
    np.testing.assert_allclose(metrics["virtual_s"], np.cumsum(durations))
    np.testing.assert_array_equal(metrics["late"], late)
    np.testing.assert_array_equal(metrics["participants"], (trace.available[:len(late)] & on_time).sum(axis=1))


def test_time_to_target_is_each_runs_virtual_time_at_its_first_evaluation_reaching_it_or_its_last():
    frame = pd.DataFrame({"experiment": "e", "algorithm": "a", "seed": [0] * 4 + [1] * 4,
                          "round": [0, 1, 2, 3] * 2, "virtual_s": [10, 20, 30, 40, 5, 10, 15, 20],
                          "test_acc": [0.1, np.nan, 0.7, 0.9, 0.2, 0.3, 0.4, 0.5]})
    times = tidy.time_to_target(frame, "test_acc", 0.6).set_index("seed")
    assert times.loc[0, "value"] == 30 and times.loc[0, "reached"]
    assert times.loc[1, "value"] == 20 and not times.loc[1, "reached"]  # never reaches 60%: censored at its end
    assert tidy.time_to_target(frame.drop(columns="virtual_s"), "test_acc", 0.6)["value"].isna().all()


def test_a_claim_cell_on_time_to_target_needs_its_target():
    cell = parse_cell({"cell": "e/a", "metric": "time_to_target", "target": 0.8}, "c")
    assert (cell["metric"], cell["target"]) == ("time_to_target", 0.8)
    with pytest.raises(ValueError, match=r"c\.target: an accuracy target goes with, and only with"):
        parse_cell({"cell": "e/a", "metric": "time_to_target"}, "c")
    with pytest.raises(ValueError, match=r"c\.target: an accuracy in \(0, 1\]"):
        parse_cell({"cell": "e/a", "metric": "time_to_target", "target": 80}, "c")


def test_session_lengths_of_a_stored_trace():
    available = np.array([[1, 0], [1, 1], [0, 1], [1, 1]], dtype=bool)
    assert sorted(session_rounds(available).tolist()) == [1, 2, 3]


def validated(config: dict) -> dict:
    validate(config)
    return config


def recorded_test_config(workdir) -> None:
    """config/recorded.yaml at the tests' size: 20 clients, two seeds, 12 rounds."""
    config = load_config([workdir / "config/recorded.yaml"])
    config["seeds"] = [0, 1]
    for partition in config["partitions"].values():
        partition["num_clients"] = 20
    config["traces"]["recorded"].update(num_clients=20, rounds=12)
    for experiment in config["experiments"].values():
        experiment["training"].update(rounds=12, eval_every=3, last_n=3, train_eval_samples=200)
    config["reports"]["claims"]["last_n"] = 3
    build_plan(validated(json.loads(json.dumps(config))))  # checked before the run
    (workdir / "config/recorded.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def test_the_recorded_example_config_runs_end_to_end(tmp_path, monkeypatch):
    workdir = copy_workflow(tmp_path / "workflow")
    shutil.copytree(REPO / "data/recorded", workdir / "data/recorded")
    monkeypatch.chdir(workdir)  # the config's record paths are relative to the workflow's folder
    recorded_test_config(workdir)
    snakemake(workdir, "--cores", "2", "--configfile", "config/recorded.yaml", timeout=900)
    runs = pd.read_parquet(workdir / "results/frames/recorded.parquet")
    assert {"virtual_s", "late"} <= set(runs.columns) and runs["virtual_s"].notna().all()
    assert runs.groupby(["experiment", "algorithm", "seed"])["virtual_s"].is_monotonic_increasing.all()
    table = pd.read_csv(workdir / "results/reports/time_fedswe/table.csv")
    assert set(table["algorithm"]) == set(load_config([workdir / "config/recorded.yaml"])["experiments"][
        "recorded_fedswe"]["algorithms"])
    figure = workdir / "results/reports/accuracy_time/figure.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "virtual time" in (workdir / "results/reports/claims/table.md").read_text()
    trace = load_trace(workdir / "data/traces/recorded/seed0.npz")
    assert trace.capacity.shape == (2, 20) and trace.params["clock"]["deadline_s"] == 45
    assert trace.params["replay"] == "fedscale" and trace.sessions is not None
    assert {"online"} <= set(runs.columns) and (runs["participants"] <= 10).all()  # the 10 fastest at most
    # A record is an input by content: touching it reruns nothing; other content of the same size and modification
    # time (what `cp -p` or `rsync -a` of another file leaves) reruns its traces and their runs
    args = ("--configfile", "config/recorded.yaml")
    record = workdir / "data/recorded/example_client_device_capacity"
    record.touch()
    assert planned_jobs(workdir, *args) == set()
    stat = record.stat()
    entries = pickle.loads(record.read_bytes())
    entries[1]["computation"] *= 2
    record.write_bytes(pickle.dumps(entries, protocol=4))
    os.utime(record, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (record.stat().st_size, record.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    planned = planned_jobs(workdir, *args)
    assert {f"trace[trace=recorded,seed={seed}]" for seed in (0, 1)} <= planned
    assert sum(job.startswith("train") for job in planned) == 9  # one process per algorithm, all seeds


def test_a_missing_record_is_a_config_error_naming_it(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    config = load_config([REPO / "config/recorded.yaml"])
    config["traces"]["recorded"]["availability"] = str(tmp_path / "nowhere.csv")
    with pytest.raises(ConfigError, match=rf"traces\.recorded: no device record at {tmp_path}/nowhere\.csv"):
        build_plan(validated(config))


@pytest.mark.parametrize("edit, message", [
    (lambda r: r.update(reference="fast_q0.5"), r"reports\.time_fedswe\.reference: the report shows no 'fast_q0\.5' in "
                                                r"experiment 'recorded_fedswe'"),
    (lambda r: r.update(targets=[0.6, 60]), r"reports\.time_fedswe\.targets: must be accuracies in \(0, 1\]"),
])
def test_a_time_to_accuracy_report_is_checked(edit, message, monkeypatch):
    monkeypatch.chdir(REPO)  # the config's record paths are relative to the workflow's folder
    config = load_config([REPO / "config/recorded.yaml"])
    edit(config["reports"]["time_fedswe"])
    with pytest.raises(ConfigError, match=message):
        build_plan(validated(config))


def test_the_fedscale_replay_fills_in_fedscales_defaults_and_the_window_rule_its_own():
    window = resolve_trace({"model": "recorded", "availability": "a.csv", "round_seconds": 10})
    assert (window.replay, window.min_online_share, window.participants, window.overcommitment,
            window.min_client_samples) == ("window", 1.0, None, None, None)
    fedscale = resolve_trace({"model": "recorded", "availability": "a.csv", "round_seconds": 10, "replay": "fedscale",
                              "clock": {}})
    assert (fedscale.min_online_share, fedscale.participants, fedscale.overcommitment,
            fedscale.min_client_samples) == (None, None, 1.3, 32)


# The clock charges the samples each client trains


def test_the_samples_of_a_round_are_those_the_trainer_plans(tmp_path):
    """samples_this_round against ClientTrainer.plan, round after round, for epochs with and without max_steps (the
    last batch of an epoch holds its remainder) and for steps."""
    from fedavail.engine.client_data import ClientData
    from fedavail.engine.local import ClientTrainer
    from fedavail.engine.params import FlatModel
    from fedavail.models import build_model
    from fedavail.partitions.partition import make_partition
    from fedavail.plan.experiments import AugmentationOptions
    from fedavail.plan.local import resolve_local

    dataset = image_dataset()
    partition = make_partition(dataset["train_y"].numpy(), 10, {"scheme": "hetero_dirichlet", "num_clients": 6,
                                                                "alpha": 0.3, "min_size": 4}, seed=1)
    data = ClientData(dataset, partition.offsets, partition.indices, torch.device("cpu"), AugmentationOptions())
    model = FlatModel(build_model("small_cnn", dataset, 0))
    for local in ({"epochs": 1, "max_steps": 2, "batch_size": 16}, {"epochs": 2, "max_steps": 7, "batch_size": 24},
                  {"epochs": 1, "batch_size": 16}, {"steps": 3, "batch_size": 16}):
        options = resolve_local(local, 0.1, "training.local")
        trainer = ClientTrainer(model, data, options, seed=0)
        state = trainer.init_state(6, torch.float32, torch.device("cpu"))
        for round_index in range(5):
            position = state["epoch_batch"].numpy() if "epoch_batch" in state else None
            plans = [trainer.plan(client, round_index, state) for client in range(6)]
            np.testing.assert_array_equal(samples_this_round(options, partition.sizes, position),
                                          [sum(len(batch) for batch in plan.batches) for plan in plans])
            for client, plan in enumerate(plans):
                if plan.cursor is not None:  # as train_together moves each participant's cursor
                    state["epoch"][client], state["epoch_batch"][client] = plan.cursor


def test_an_epoch_based_run_is_charged_the_samples_each_client_trained(tmp_path):
    """epochs 1, max_steps 2, B 16 on clients of 40 samples: a client's participations alternate 2 batches (32
    samples) and the epoch's last batch (8), not max_steps × B every time."""
    training_inputs(tmp_path)
    trace = load_trace(tmp_path / "trace.npz")
    computation_ms = np.linspace(10.0, 100.0, 10)
    trace.capacity = np.stack([computation_ms, np.full(10, 1000.0)])
    trace.params["clock"] = {"capacity": None, "computation_ms": 100.0, "communication_kbps": 1000.0, "sigma": 0.0,
                             "deadline_s": None}
    save_trace(tmp_path / "trace.npz", trace)
    spec = json.loads(json.dumps(SPEC))
    spec["algorithm"] = {"algorithm": "fedavg", "lr": 0.05, "weighting": "active"}
    spec["training"]["local"] = {"epochs": 1, "max_steps": 2, "batch_size": 16}
    summary = run(tmp_path / "data.pt", tmp_path / "partition.npz", tmp_path / "trace.npz", tmp_path / "run", spec)
    metrics = pd.read_parquet(tmp_path / "run/metrics.parquet")
    sizes = load_partition(tmp_path / "partition.npz").sizes
    assert (sizes == 40).all()
    participations, durations = np.zeros(10, dtype=int), []
    for t in range(spec["training"]["rounds"]):
        participants = trace.available[t]  # FedAvg over active clients: every available client
        samples = np.where(participations % 2 == 0, 32.0, 8.0)
        needs = completion_seconds(trace.capacity, samples, summary["dimension"])
        durations.append(needs[participants].max() if participants.any() else 0.0)
        participations += participants
    np.testing.assert_allclose(metrics["virtual_s"], np.cumsum(durations))
    assert "late" not in metrics and "online" not in metrics


# FedScale's replay, checked by hand


# Record clients in file order a, ..., e, every 100 s; capacities in the same order. FedScale's client k = i + 1 plays
# keys[k mod 5]: client 0 plays b, 1 c, 2 d, 3 e, 4 a. A round's work (48 samples) takes a 1.44 s, b 2.88 s, c 5.76 s,
# d 11.52 s and e 23.04 s: e misses the 12 s deadline.
SESSIONS = {"a": [(0, 100)], "b": [(0, 3), (20, 100)], "c": [(0, 10), (20, 40)], "d": [(20, 30)], "e": [(0, 50)]}
COMPUTATION_MS = {"a": 10.0, "b": 20.0, "c": 40.0, "d": 80.0, "e": 160.0}
PLAYS = ["b", "c", "d", "e", "a"]


def fedscale_by_hand(needs, rounds, participants, overcommitment, deadline, seed):
    """FedScale 1.0's rounds (select_participants, tictak_client_tasks, round_completion_handler) in plain Python:
    online at the round's start on the clock, less the late; ⌊overcommitment·K⌋ drawn when more are online; those
    still online at their completion; the K fastest; the clock advanced by the slowest of them."""
    def online(client, instant):
        return any(start <= instant % 100 <= end for start, end in SESSIONS[PLAYS[client]])

    clock, rows = 0.0, []
    for t in range(rounds):
        up = [c for c in range(len(PLAYS)) if online(c, clock)]
        late = [c for c in up if needs[c] > deadline]
        candidates = [c for c in up if c not in late]
        drawn = int(participants * overcommitment)
        if len(candidates) > drawn:
            candidates = sorted(numpy_generator(seed, "replay", t).permutation(candidates)[:drawn].tolist())
        finishing = [c for c in candidates if online(c, clock + needs[c])]
        chosen = sorted(finishing, key=lambda c: needs[c])[:participants]
        clock += max(needs[c] for c in chosen)  # client 4 (a) is always online and on time: never an empty round
        rows.append((len(chosen), clock, len(late), len(up)))
    return rows


def test_the_fedscale_replay_follows_fedscales_rules_computed_by_hand(tmp_path):
    training_inputs(tmp_path)
    partition = make_partition(image_dataset()["train_y"].numpy(), 10,
                               {"scheme": "client_dirichlet", "num_clients": 5, "alpha": 0.5}, seed=0)
    save_partition(tmp_path / "partition.npz", partition)
    record = write_intervals(tmp_path / "online.csv", [(c, s, e) for c, spans in SESSIONS.items() for s, e in spans],
                             period=100)
    capacity = tmp_path / "capacity.csv"
    capacity.write_text("client,computation_ms,communication_kbps\n" +
                        "".join(f"{c},{ms},1000000\n" for c, ms in COMPUTATION_MS.items()))
    spec = {"model": "recorded", "availability": record, "replay": "fedscale", "round_seconds": 5, "participants": 2,
            "overcommitment": 1.5, "min_client_samples": 0, "clock": {"capacity": str(capacity), "deadline_s": 12}}
    trace = make_trace(spec, num_clients=5, rounds=40, seed=3)
    assert trace.params["record_clients"] == PLAYS and trace.params["capacity_clients"] == PLAYS
    # The trace file's preview: who is online at 0, 5 and 10 s (sessions are closed: c until 10 s included)
    np.testing.assert_array_equal(trace.available[:3], [[1, 1, 0, 1, 1], [0, 1, 0, 1, 1], [0, 1, 0, 1, 1]])
    save_trace(tmp_path / "trace.npz", trace)
    run_spec = json.loads(json.dumps(SPEC))
    run_spec["seed"], run_spec["training"]["rounds"] = 3, 40
    run_spec["algorithm"] = {"algorithm": "fedavg", "lr": 0.05, "weighting": "active"}
    summary = run(tmp_path / "data.pt", tmp_path / "partition.npz", tmp_path / "trace.npz", tmp_path / "run", run_spec)
    metrics = pd.read_parquet(tmp_path / "run/metrics.parquet")
    samples = run_spec["training"]["local"]["steps"] * run_spec["training"]["local"]["batch_size"]
    needs = [3 * samples * COMPUTATION_MS[c] / 1000 + 2 * summary["dimension"] * 32 / 1000 / 1e6 for c in PLAYS]
    expected = fedscale_by_hand(needs, 40, participants=2, overcommitment=1.5, deadline=12, seed=3)
    count, clock, late, up = (list(column) for column in zip(*expected))
    np.testing.assert_array_equal(metrics["participants"], count)
    np.testing.assert_allclose(metrics["virtual_s"], clock)
    np.testing.assert_array_equal(metrics["late"], late)
    np.testing.assert_array_equal(metrics["online"], up)
    # Round 0 at 0 s: b, c, e, a online, e late; b, c, a finish while online: the fastest two, a and b (2.88 s);
    # round 1 at 2.88 s: b would end after its session (3 s), so c (5.76 s) and a; round 2 at 8.64 s: c would end
    # past 10 s, so a alone. All five are online in [20, 30]: four on time, of which ⌊1.5 × 2⌋ = 3 are drawn.
    assert count[:3] == [2, 2, 1] and late[:3] == [1, 1, 1] and up[:3] == [4, 4, 3]
    np.testing.assert_allclose(np.diff([0.0, *clock[:3]]), [needs[0], needs[1], needs[4]])
    assert any(u == 5 for u in up)


def test_the_replay_filters_small_clients_and_waits_for_the_next_session_when_nobody_can_take_part():
    sessions = OnlineRecord(("0", "1"), np.array([0.0, 50.0, 10.0]), np.array([5.0, 60.0, 20.0]),
                            np.array([0, 0, 1]), None)
    replay = FedScaleReplay(sessions, 0.0, eligible=np.array([True, False]), participants=None, overcommitment=1.3,
                            seed=0)
    seconds, on_time = np.array([1.0, 1.0]), np.array([True, True])
    admitted, late, online = replay.admit(0, 12.0, seconds, on_time)  # only client 1 online, and it is filtered
    assert not admitted.any() and (late, online) == (0, 0)
    assert replay.next_session(12.0, on_time) == 50.0  # client 0's next session; client 1 never counts
    assert replay.next_session(55.0, on_time) == np.inf  # the record has ended
    with pytest.raises(ValueError, match=r"'min_client_samples' is 32, but the partition's largest client has 20"):
        FedScaleReplay.of_trace({"min_client_samples": 32, "start_s": 0, "participants": None, "overcommitment": 1.3,
                                 "seed": 0}, sessions, np.array([20, 10]), "trace t.npz")


# Nothing empty silent


def test_a_recorded_trace_with_no_client_ever_available_is_refused_naming_its_settings(tmp_path):
    record = write_intervals(tmp_path / "online.csv", [("a", 0, 25), ("b", 5, 40)])
    for settings in ({"round_seconds": 1e9}, {"round_seconds": 10, "start_s": 100}):
        with pytest.raises(ValueError, match="'round_seconds', 'start_s' and 'min_online_share': no client is online"):
            make_trace({"model": "recorded", "availability": record, **settings}, 2, 5, seed=0)


def test_a_deadline_no_client_can_meet_is_refused_before_the_first_round(tmp_path):
    training_inputs(tmp_path)
    trace = load_trace(tmp_path / "trace.npz")
    trace.capacity = np.stack([np.full(10, 100.0), np.full(10, 1000.0)])
    trace.params["clock"] = {"capacity": None, "computation_ms": 100.0, "communication_kbps": 1000.0, "sigma": 0.0,
                             "deadline_s": 1e-9}
    save_trace(tmp_path / "trace.npz", trace)
    with pytest.raises(ValueError, match=r"'deadline_s' is 1e-09 s, but no client can ever finish a round in time"):
        run(tmp_path / "data.pt", tmp_path / "partition.npz", tmp_path / "trace.npz", tmp_path / "run", SPEC)
    assert not (tmp_path / "run/metrics.parquet").exists()


def test_a_trace_job_resolves_its_spec_once(tmp_path, monkeypatch):
    from fedavail.availability import trace_models

    calls = []
    variant = trace_models.resolve_variant
    monkeypatch.setattr(trace_models, "resolve_variant", lambda spec, registry, *args: calls.append(spec["model"]) or
                        variant(spec, registry, *args))
    record = write_intervals(tmp_path / "online.csv", [("a", 0, 25), ("b", 5, 40)])
    make_trace({"model": "recorded", "availability": record, "round_seconds": 10, "clock": {"sigma": 0.5}}, 2, 3, 0)
    assert calls == ["recorded"]
