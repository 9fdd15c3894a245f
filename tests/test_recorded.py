"""Recorded availability and the virtual clock, wired into the workflow: the `recorded` trace model's mapping of a
record onto clients and rounds (checked by hand), the clock's round durations and deadline in a training run
(checked by hand), time to a target accuracy in reports and claims, the trace statistics, and config/recorded.yaml
end to end at the tests' size."""

import json
import pickle
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml

from fedavail.availability.models import resolve_trace
from fedavail.availability.records import RecordError
from fedavail.availability.traces import completion_seconds, load_trace, make_trace, save_trace, session_rounds
from fedavail.plan.claim_parsing import parse_cell
from fedavail.plan.config import ConfigError
from fedavail.plan.load import load_config, validate
from fedavail.plan.plan import build_plan
from fedavail.report import frame as tidy
from fedavail.train import run

from synthetic import training_inputs
from test_train import SPEC
from tiny_run import planned_jobs
from workflow_helpers import REPO, copy_workflow, snakemake


def write_intervals(path, rows) -> str:
    path.write_text("client,start_s,end_s\n" + "".join(f"{c},{s},{e}\n" for c, s, e in rows))
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
    ({"round_seconds": 10, "clock": {"sigma": -1}}, r"'sigma' must be a number >= 0"),
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


def test_time_to_target_is_each_runs_virtual_time_at_its_first_evaluation_reaching_it():
    frame = pd.DataFrame({"experiment": "e", "algorithm": "a", "seed": [0] * 4 + [1] * 4,
                          "round": [0, 1, 2, 3] * 2, "virtual_s": [10, 20, 30, 40, 5, 10, 15, 20],
                          "test_acc": [0.1, np.nan, 0.7, 0.9, 0.2, 0.3, 0.4, 0.5]})
    times = tidy.time_to_target(frame, "test_acc", 0.6).set_index("seed")["value"]
    assert times[0] == 30 and np.isnan(times[1])  # seed 1 never reaches 60%
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
    # A record is an input by content: touching it reruns nothing, a new content reruns its traces and their runs
    args = ("--configfile", "config/recorded.yaml")
    record = workdir / "data/recorded/example_client_device_capacity"
    record.touch()
    assert planned_jobs(workdir, *args) == set()
    entries = pickle.loads(record.read_bytes())
    entries[1]["computation"] *= 2
    record.write_bytes(pickle.dumps(entries))
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
    (lambda r: r.update(targets=[0.6, 60]), r"reports\.time_fedswe\.targets: accuracies in \(0, 1\]"),
])
def test_a_time_to_accuracy_report_is_checked(edit, message, monkeypatch):
    monkeypatch.chdir(REPO)  # the config's record paths are relative to the workflow's folder
    config = load_config([REPO / "config/recorded.yaml"])
    edit(config["reports"]["time_fedswe"])
    with pytest.raises(ConfigError, match=message):
        build_plan(validated(config))
