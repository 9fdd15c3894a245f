"""Recorded device availability (fedavail.availability.device_records): FedScale's pickles and interval tables read
exactly, every malformed or unsafe file refused naming the file, online time and per-window availability checked by
hand, the client draw, and the example-record generator."""

import collections
import datetime
import importlib.util
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow
import pyarrow.csv
import pyarrow.parquet
import pytest

from fedavail.availability import device_records
from fedavail.availability.device_records import (OnlineRecord, RecordError, available_in_windows, client_sessions,
                                                  draw_clients, fedscale_clients, load_plain_pickle, next_start,
                                                  online_at, online_seconds, read_capacity_table,
                                                  read_fedscale_availability, read_fedscale_capacity,
                                                  read_interval_table, read_online_record, record_format,
                                                  round_windows)

ROOT = Path(__file__).resolve().parents[1]


def write_pickle(path: Path, obj) -> Path:
    path.write_bytes(pickle.dumps(obj, protocol=4))
    return path


def write_csv(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def behaviour(active, inactive, finish_time=100, **extra) -> dict:
    return {"duration": finish_time, "inactive": inactive, "finish_time": finish_time, "active": active,
            "model": "Pixel 4a", **extra}


def assert_refused(read, path: Path, *fragments: str) -> str:
    with pytest.raises(RecordError) as caught:
        read(path)
    message = str(caught.value)
    assert str(path) in message and caught.value.path == path
    for fragment in fragments:
        assert fragment in message, message
    return message


# Reading


def test_fedscale_availability_is_read_exactly_in_client_order(tmp_path):
    path = write_pickle(tmp_path / "client_behave_trace", {
        10: behaviour([0, 50, 120], [30, 150, 130]),  # past finish_time 100: clipped, the last session vanishes
        2: behaviour([40, 5, 20], [60, 10, 45], finish_time=200),  # unsorted; [20, 45] overlaps [40, 60]
        1: behaviour([], [], finish_time=50),  # never online
    })
    record = read_fedscale_availability(path)
    assert record.clients == ("1", "2", "10")
    np.testing.assert_array_equal(record.starts, [5.0, 20.0, 0.0, 50.0])
    np.testing.assert_array_equal(record.ends, [10.0, 60.0, 30.0, 100.0])
    np.testing.assert_array_equal(record.owner, [1, 1, 2, 2])
    np.testing.assert_array_equal(record.period, [50.0, 200.0, 100.0])
    assert record.starts.dtype == np.float64 and record.owner.dtype == np.int64 and record.period.dtype == np.float64
    np.testing.assert_array_equal(record.ends - record.starts, [5.0, 40.0, 30.0, 50.0])


def test_fedscale_availability_needs_only_active_inactive_and_finish_time(tmp_path):
    path = write_pickle(tmp_path / "trace", {"b": {"active": [1.5], "inactive": [2.5], "finish_time": 3.0},
                                             "a": {"active": [0], "inactive": [1], "finish_time": 1}})
    record = read_fedscale_availability(path)
    assert record.clients == ("a", "b")  # not all integers: string order
    np.testing.assert_array_equal(record.starts, [0.0, 1.5])
    np.testing.assert_array_equal(record.period, [1.0, 3.0])


def test_fedscale_capacity_is_read_exactly(tmp_path):
    path = write_pickle(tmp_path / "client_device_capacity", {
        7: {"computation": 162.0, "communication": 5648.25},
        3: {"computation": 80, "communication": 1200.5}})
    capacity = read_fedscale_capacity(path)
    assert capacity.clients == ("3", "7")
    np.testing.assert_array_equal(capacity.computation_ms, [80.0, 162.0])
    np.testing.assert_array_equal(capacity.communication_kbps, [1200.5, 5648.25])
    assert capacity.computation_ms.dtype == np.float64


INTERVALS = [("10", 5.0, 10.0), ("10", 0.0, 5.0), ("10", 8.0, 12.0), ("10", 20.0, 20.0), ("2", 30.0, 31.5),
             ("2", 1.0, 2.0)]


def check_intervals(record: OnlineRecord):
    assert record.clients == ("2", "10")  # all integers: numeric order
    np.testing.assert_array_equal(record.starts, [1.0, 30.0, 0.0])  # 10's sessions touch or overlap: one session
    np.testing.assert_array_equal(record.ends, [2.0, 31.5, 12.0])
    np.testing.assert_array_equal(record.owner, [0, 0, 1])
    assert record.period is None


def test_interval_table_csv_is_read_exactly(tmp_path):
    rows = "".join(f"{client},{start},{end},ignored\n" for client, start, end in INTERVALS)
    check_intervals(read_interval_table(write_csv(tmp_path / "sessions.csv", "client,start_s,end_s,note\n" + rows)))


def test_interval_table_parquet_is_read_exactly(tmp_path):
    clients, starts, ends = zip(*INTERVALS)
    table = pyarrow.table({"end_s": list(ends), "client": [int(c) for c in clients], "start_s": list(starts)})
    pyarrow.parquet.write_table(table, tmp_path / "sessions.parquet")
    check_intervals(read_interval_table(tmp_path / "sessions.parquet"))


def test_capacity_tables_are_read_exactly(tmp_path):
    csv_path = write_csv(tmp_path / "capacity.csv", "client,communication_kbps,computation_ms\nb,900,12.5\na,100,3\n")
    pyarrow.parquet.write_table(pyarrow.table({"client": ["b", "a"], "computation_ms": [12.5, 3.0],
                                               "communication_kbps": [900.0, 100.0]}), tmp_path / "capacity.pq")
    for path in (csv_path, tmp_path / "capacity.pq"):
        capacity = read_capacity_table(path)
        assert capacity.clients == ("a", "b")
        np.testing.assert_array_equal(capacity.computation_ms, [3.0, 12.5])
        np.testing.assert_array_equal(capacity.communication_kbps, [100.0, 900.0])


def test_a_missing_file_stays_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_fedscale_availability(tmp_path / "absent")
    with pytest.raises(FileNotFoundError):
        read_interval_table(tmp_path / "absent.csv")


def test_the_module_loads_without_torch_pandas_or_pyarrow():
    code = ("import sys, fedavail.availability.device_records; "
            "assert not {'torch', 'pandas', 'pyarrow'} & set(sys.modules), 'heavy module imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


# Refusals


class Shell:
    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def test_pickles_of_classes_are_refused_before_anything_runs(tmp_path):
    marker = tmp_path / "ran"
    crafted = tmp_path / "crafted"
    crafted.write_bytes(pickle.dumps({1: Shell(f"touch {marker}")}))
    message = assert_refused(load_plain_pickle, crafted, "system")
    assert not marker.exists()
    assert_refused(read_fedscale_availability, crafted, "system")
    assert not marker.exists()

    ordered = write_pickle(tmp_path / "ordered", collections.OrderedDict())
    assert_refused(load_plain_pickle, ordered, "collections.OrderedDict")
    dated = write_pickle(tmp_path / "dated", {1: {"computation": datetime.date(2021, 5, 24), "communication": 1.0}})
    assert_refused(read_fedscale_capacity, dated, "datetime.date")
    assert "plain dicts" in message


def test_plain_values_survive_the_restricted_unpickler(tmp_path):
    value = {1: [1.5, "x", b"y", None, True, (2, 3)], "s": {4, 5}}
    assert load_plain_pickle(write_pickle(tmp_path / "plain", value)) == value


def test_damaged_pickles_are_refused(tmp_path):
    whole = pickle.dumps({1: behaviour([0], [5])}, protocol=4)
    truncated = tmp_path / "truncated"
    truncated.write_bytes(whole[: len(whole) // 2])
    assert_refused(read_fedscale_availability, truncated, "not a readable pickle")
    text = write_csv(tmp_path / "text", "hello, this is text\n")
    assert_refused(read_fedscale_availability, text, "not a readable pickle")
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert_refused(load_plain_pickle, empty, "not a readable pickle")


GOOD = behaviour([0, 10], [5, 20])


def after_a_good_client(entry) -> dict:
    """Client 1 is well formed, so the refusal must come from client 7."""
    return {1: GOOD, 7: entry}


def without(key: str) -> dict:
    return {k: v for k, v in GOOD.items() if k != key}


MALFORMED_BEHAVIOUR = {
    "not a dict": ([GOOD], "the pickle holds a list"),
    "empty": ({}, "the pickle holds an empty dict"),
    "value not a dict": (after_a_good_client([0, 5]), "client 7: the value is a list"),
    "no active": (after_a_good_client(without("active")), "client 7: no 'active'"),
    "no inactive": (after_a_good_client(without("inactive")), "client 7: no 'inactive'"),
    "no finish_time": (after_a_good_client(without("finish_time")), "client 7: no 'finish_time'"),
    "lengths differ": (after_a_good_client(behaviour([0, 10], [5])), "client 7: 'active' has 2 times but 'inactive' 1"),
    "string time": (after_a_good_client(behaviour(["0"], [5])), "client 7: 'active' is not a list of numbers"),
    "bool time": (after_a_good_client(behaviour([0], [True])), "client 7: 'inactive' is not a list of numbers"),
    "times not a list": (after_a_good_client(behaviour(0, 5)), "client 7: 'active' is not a list of numbers"),
    "negative time": (after_a_good_client(behaviour([-1], [5])), "client 7: 'active' holds a negative"),
    "infinite time": (after_a_good_client(behaviour([0], [float("inf")])), "client 7: 'inactive' holds a negative"),
    "inverted session": (after_a_good_client(behaviour([0, 10], [5, 8])), "client 7: session 1 ends (inactive 8)"),
    "zero finish_time": (after_a_good_client(behaviour([0], [5], finish_time=0)), "client 7: 'finish_time' is 0"),
    "negative finish_time": (after_a_good_client(behaviour([0], [5], finish_time=-3)), "'finish_time' is -3"),
    "string finish_time": (after_a_good_client(behaviour([0], [5], finish_time="9")), "'finish_time' is '9'"),
    "string duration": (after_a_good_client({**GOOD, "duration": "long"}), "client 7: 'duration' is 'long'"),
    "numeric model": (after_a_good_client({**GOOD, "model": 5}), "client 7: 'model' is 5"),
    "float client id": ({7.0: GOOD}, "client id 7.0"),
    "duplicate client id": ({7: GOOD, "7": GOOD}, "client id '7' appears twice"),
}


@pytest.mark.parametrize("case", MALFORMED_BEHAVIOUR)
def test_malformed_fedscale_availability_is_refused(tmp_path, case):
    content, fragment = MALFORMED_BEHAVIOUR[case]
    path = write_pickle(tmp_path / "client_behave_trace", content)
    assert_refused(read_fedscale_availability, path, fragment, "client_behave_trace layout")


@pytest.mark.parametrize("entry, fragment", [
    ({"computation": 10.0}, "client 4: no 'communication'"),
    ({"computation": 0.0, "communication": 5.0}, "client 4: computation_ms is 0, outside the plausible [1e-06, 1e+06]"),
    ({"computation": float("nan"), "communication": 5.0}, "client 4: 'computation' is nan"),
    ({"computation": 10.0, "communication": 1e-300}, "client 4: communication_kbps is 1e-300, outside the plausible"),
    ({"computation": 10.0, "communication": "fast"}, "client 4: 'communication' is 'fast'"),
])
def test_malformed_fedscale_capacity_is_refused(tmp_path, entry, fragment):
    path = write_pickle(tmp_path / "client_device_capacity", {4: entry})
    assert_refused(read_fedscale_capacity, path, fragment, "client_device_capacity layout")


@pytest.mark.parametrize("name, text, fragments", [
    ("missing.csv", "client,start_s,stop_s\n1,0,5\n", ("no column end_s", "it has client, start_s, stop_s")),
    ("negative.csv", "client,start_s,end_s\n1,0,5\n2,-1,5\n", ("row 1", "client 2", "negative or inverted")),
    ("inverted.csv", "client,start_s,end_s\n1,6,5\n", ("row 0", "client 1 from 6 to 5 s", "negative or inverted")),
    ("word.csv", "client,start_s,end_s\n1,soon,5\n", ("not a readable table", "invalid value 'soon'")),
    ("nan.csv", "client,start_s,end_s\n1,0,nan\n", ("row 0: end_s is missing",)),
    ("empty_cell.csv", "client,start_s,end_s\n1,0,5\n1,,7\n", ("row 1: start_s is missing",)),
    ("infinite.csv", "client,start_s,end_s\n1,0,inf\n", ("row 0: end_s is inf, not a finite number",)),
    ("short.csv", "client,start_s,end_s\n1,0\n", ("not a readable table", "Expected 3 columns, got 2")),
    ("no_client.csv", "client,start_s,end_s\n ,0,5\n", ("client id ' ' is not an integer or a non-empty string",)),
    ("float_id.csv", "client,start_s,end_s\n1,0,5\n1.0,6,8\n", ("client id '1.0' is a number but not an integer",)),
    ("twice.csv", "client,start_s,end_s,start_s\n1,0,5,9\n", ("column start_s appears more than once",)),
    ("empty.csv", "client,start_s,end_s\n", ("no rows",)),
    ("blank.csv", "", ("the file is empty",)),
    ("zero_length.csv", "client,start_s,end_s\n1,5,5\n2,7,7\n", ("no client of the record's 2 is ever online",)),
])
def test_malformed_interval_tables_are_refused(tmp_path, name, text, fragments):
    path = write_csv(tmp_path / name, text)
    layout = () if name in ("blank.csv", "zero_length.csv") else ("client, start_s, end_s",)
    assert_refused(read_interval_table, path, *fragments, *layout)


def test_malformed_parquet_and_capacity_tables_are_refused(tmp_path):
    pyarrow.parquet.write_table(pyarrow.table({"client": ["1"], "start_s": [0.0]}), tmp_path / "short.parquet")
    assert_refused(read_interval_table, tmp_path / "short.parquet", "no column end_s", "it has client, start_s")
    pyarrow.parquet.write_table(pyarrow.table({"client": [1.5], "start_s": [0.0], "end_s": [1.0]}),
                                tmp_path / "float_ids.parquet")
    assert_refused(read_interval_table, tmp_path / "float_ids.parquet", "column client holds double")
    damaged = tmp_path / "damaged.parquet"
    damaged.write_bytes(b"PAR1 not really")
    assert_refused(read_interval_table, damaged, "not a readable table")
    twice = write_csv(tmp_path / "twice.csv", "client,computation_ms,communication_kbps\n1,5,5\n1,6,6\n")
    assert_refused(read_capacity_table, twice, "client 1 has rows 0 and 1")
    zero = write_csv(tmp_path / "zero.csv", "client,computation_ms,communication_kbps\n1,5,0\n")
    assert_refused(read_capacity_table, zero, "client 1: communication_kbps is 0, outside the plausible")


# Online time and availability

# Client 0 ("a"): online [10, 20) and [30, 50), never again. Client 1 ("b"): online [2, 4) and [6, 9), every 10 s.
TINY = OnlineRecord(clients=("a", "b"), starts=np.array([10.0, 30.0, 2.0, 6.0]), ends=np.array([20.0, 50.0, 4.0, 9.0]),
                    owner=np.array([0, 0, 1, 1]), period=None)
TINY_PERIODIC = OnlineRecord(TINY.clients, TINY.starts, TINY.ends, TINY.owner, period=np.array([1000.0, 10.0]))


def test_online_seconds_by_hand():
    times = np.array([0.0, 10.0, 15.0, 20.0, 25.0, 40.0, 60.0, 1e6])
    np.testing.assert_array_equal(online_seconds(TINY, 0, times), [0, 0, 5, 10, 10, 20, 30, 30])
    np.testing.assert_array_equal(online_seconds(TINY, 1, [3.0, 5.0, 8.0, 10.0, 13.0]), [1, 2, 4, 5, 5])
    # With period 10, client 1 repeats: F(x) = ⌊x/10⌋·5 + F(x mod 10).
    np.testing.assert_array_equal(online_seconds(TINY_PERIODIC, 1, [8.0, 10.0, 13.0, 25.0, 40.0]), [4, 5, 6, 12, 20])
    np.testing.assert_array_equal(online_seconds(TINY_PERIODIC, 0, times[:-1]), online_seconds(TINY, 0, times[:-1]))
    assert online_seconds(TINY_PERIODIC, 0, [1e6])[0] == 1000 * 30
    assert online_seconds(TINY, 0, np.zeros((2, 3))).shape == (2, 3)


def test_online_seconds_of_a_client_never_online():
    never = OnlineRecord(("x", "y"), np.array([1.0]), np.array([2.0]), np.array([1]), period=np.array([5.0, 5.0]))
    np.testing.assert_array_equal(online_seconds(never, 0, [0.0, 3.0, 17.0]), [0, 0, 0])
    np.testing.assert_array_equal(online_seconds(never, 1, [0.0, 3.0, 17.0]), [0, 1, 4])


def test_online_seconds_refuses_bad_arguments():
    with pytest.raises(ValueError, match="record client 2 does not exist"):
        online_seconds(TINY, 2, [1.0])
    with pytest.raises(ValueError, match="times >= 0"):
        online_seconds(TINY, 0, [-1.0])


def test_available_in_windows_by_hand():
    starts = np.array([0.0, 2.0, 3.0, 12.0, 18.0, 10.0])
    ends = np.array([10.0, 4.0, 7.0, 14.0, 23.0, 20.0])
    # Client 1 (period 10) is online 5, 2, 2, 2, 2 and 5 s of these windows: shares .5, 1, .5, 1, .4, .5.
    # Client 0 is online 0, 0, 0, 2, 2 and 10 s: shares 0, 0, 0, 1, .4, 1.
    chosen = np.array([1, 0, 1])
    full = available_in_windows(TINY_PERIODIC, chosen, starts, ends, 1.0)
    half = available_in_windows(TINY_PERIODIC, chosen, starts, ends, 0.5)
    client_1_full, client_0_full = [0, 1, 0, 1, 0, 0], [0, 0, 0, 1, 0, 1]
    client_1_half, client_0_half = [1, 1, 1, 1, 0, 1], [0, 0, 0, 1, 0, 1]
    np.testing.assert_array_equal(full, np.array([client_1_full, client_0_full, client_1_full], dtype=bool).T)
    np.testing.assert_array_equal(half, np.array([client_1_half, client_0_half, client_1_half], dtype=bool).T)
    assert full.dtype == bool and full.shape == (6, 3)
    without_period = available_in_windows(TINY, chosen, starts, ends, 1.0)
    assert not without_period[3:5, 0].any()  # no wrap: client 1 is offline after 9 s


def test_available_in_windows_tolerates_float_rounding():
    record = OnlineRecord(("a",), np.array([0.1]), np.array([0.7]), np.array([0]), period=None)
    starts, ends = round_windows(3, 0.2, 0.1)
    assert available_in_windows(record, np.array([0]), starts, ends, 1.0).all()


def test_available_in_windows_refuses_bad_arguments():
    with pytest.raises(ValueError, match="min_share"):
        available_in_windows(TINY, np.array([0]), np.array([0.0]), np.array([1.0]), 0.0)
    with pytest.raises(ValueError, match="every end after its start"):
        available_in_windows(TINY, np.array([0]), np.array([1.0]), np.array([1.0]), 0.5)


def reference_online(starts, ends, period, x):
    """Online seconds in [0, x) by unrolling every repetition of the sessions."""
    repeats = range(int(x // period) + 1) if period is not None else range(1)
    shift = period or 0.0
    return sum(max(0.0, min(e + k * shift, x) - (s + k * shift)) for k in repeats for s, e in zip(starts, ends)
               if s + k * shift < x)


def test_online_seconds_match_a_direct_sum_on_generated_records(tmp_path):
    generator_main()(["--out-dir", str(tmp_path), "--clients", "30", "--days", "1", "--seed", "1"])
    record = read_fedscale_availability(tmp_path / "example_client_behave_trace")
    rng = np.random.default_rng(5)
    for client in rng.choice(len(record.clients), 10, replace=False):
        mine = record.owner == client
        times = rng.uniform(0, 3 * record.period[client], 20)
        expected = [reference_online(record.starts[mine], record.ends[mine], record.period[client], x) for x in times]
        np.testing.assert_allclose(online_seconds(record, int(client), times), expected, rtol=1e-12, atol=1e-6)


def test_round_windows():
    starts, ends = round_windows(3, 10.0, start_s=5.0)
    np.testing.assert_array_equal(starts, [5.0, 15.0, 25.0])
    np.testing.assert_array_equal(ends, [15.0, 25.0, 35.0])
    with pytest.raises(ValueError, match="round_seconds > 0"):
        round_windows(3, 0.0)


# Drawing record clients


def test_draw_clients_without_repeat_is_distinct_and_seeded():
    drawn = draw_clients(50, 20, np.random.default_rng(1))
    assert drawn.dtype == np.int64 and len(set(drawn.tolist())) == 20 and drawn.min() >= 0 and drawn.max() < 50
    np.testing.assert_array_equal(drawn, draw_clients(50, 20, np.random.default_rng(1)))
    assert not np.array_equal(drawn, draw_clients(50, 20, np.random.default_rng(2)))
    np.testing.assert_array_equal(drawn, draw_clients(50, 20, np.random.default_rng(1), repeat=True))


def test_draw_clients_refuses_too_few_record_clients():
    with pytest.raises(ValueError, match=r"the record has 5 clients but the partition 8; set repeat"):
        draw_clients(5, 8, np.random.default_rng(0))


def test_draw_clients_with_repeat_is_balanced():
    drawn = draw_clients(7, 30, np.random.default_rng(3), repeat=True)
    counts = np.bincount(drawn, minlength=7)
    assert counts.sum() == 30 and set(counts.tolist()) <= {4, 5}
    assert sorted(drawn[:7].tolist()) == list(range(7))  # each whole deal is a permutation


# The example-record generator


def generator_main():
    spec = importlib.util.spec_from_file_location("make_example_records", ROOT / "scripts/make_example_records.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_the_generator_writes_readable_identical_files(tmp_path):
    main = generator_main()
    arguments = ["--clients", "25", "--days", "1", "--seed", "3"]
    main(["--out-dir", str(tmp_path / "first"), *arguments])
    main(["--out-dir", str(tmp_path / "second"), *arguments])
    names = sorted(path.name for path in (tmp_path / "first").iterdir())
    assert names == ["README.md", "example_client_behave_trace", "example_client_device_capacity"]
    for name in names:
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes()
    main(["--out-dir", str(tmp_path / "other"), "--clients", "25", "--days", "1", "--seed", "4"])
    assert (tmp_path / "other/example_client_behave_trace").read_bytes() != (
        tmp_path / "first/example_client_behave_trace").read_bytes()

    raw = load_plain_pickle(tmp_path / "first/example_client_behave_trace")
    assert list(raw) == list(range(1, 26))
    for entry in raw.values():
        assert set(entry) == {"duration", "inactive", "finish_time", "active", "model"}
        assert entry["finish_time"] == 86400 and isinstance(entry["model"], str)
        assert entry["duration"] == (86400 - entry["active"][0] if entry["active"] else 0)
    record = read_fedscale_availability(tmp_path / "first/example_client_behave_trace")
    assert record.clients == tuple(str(i) for i in range(1, 26))
    assert len(record.starts) == sum(len(entry["active"]) for entry in raw.values())  # written already merged
    assert (record.starts >= 0).all() and (record.ends <= 86400).all() and (record.ends > record.starts).all()
    capacity = read_fedscale_capacity(tmp_path / "first/example_client_device_capacity")
    assert capacity.clients == record.clients
    assert (capacity.computation_ms > 0).all() and (capacity.communication_kbps > 0).all()
    assert "generated" in (tmp_path / "first/README.md").read_text().lower()


def assert_same_values(mine, shipped, where: str = "") -> None:
    """Equal structure, keys, strings and integers; floats within 1e-12 relative: np.exp and the log-normal draws may
    round the last bit differently on another CPU (Intel AVX-512 against AMD AVX2), so shipped floats are compared
    within that tolerance, never bit for bit."""
    assert type(mine) is type(shipped), where
    if isinstance(mine, dict):
        assert list(mine) == list(shipped), where
        for key in mine:
            assert_same_values(mine[key], shipped[key], f"{where}[{key!r}]")
    elif isinstance(mine, list):
        assert len(mine) == len(shipped), where
        for index, (a, b) in enumerate(zip(mine, shipped)):
            assert_same_values(a, b, f"{where}[{index}]")
    elif isinstance(mine, float):
        assert mine == pytest.approx(shipped, rel=1e-12), where
    else:  # ints (whole seconds), strings
        assert mine == shipped, where


def test_the_shipped_example_records_are_what_the_generator_writes(tmp_path):
    generator_main()(["--out-dir", str(tmp_path)])
    for name in ("example_client_behave_trace", "example_client_device_capacity"):
        assert_same_values(load_plain_pickle(tmp_path / name), load_plain_pickle(ROOT / "data/recorded" / name))
    assert (tmp_path / "README.md").read_text() == (ROOT / "data/recorded/README.md").read_text()


# Hardening: bounded messages and the limits


def test_a_pickle_that_reaches_one_list_a_billion_times_is_refused_in_a_bounded_message(tmp_path):
    """A few kilobytes of shared references once made a 302-million-character message, one level more ran out of
    memory: the values a pickle reaches are counted, and every message is cut short."""
    shared = [1.0] * 100
    for _ in range(4):
        shared = [shared] * 100
    path = write_pickle(tmp_path / "bomb", {1: behaviour(shared, [5])})
    assert path.stat().st_size < 10_000
    message = assert_refused(read_fedscale_availability, path, "more than 100,000,000 values")
    assert len(message) < 1000
    big_model = write_pickle(tmp_path / "model", {1: {**GOOD, "model": ["x" * 10_000] * 10_000}})
    assert len(assert_refused(read_fedscale_availability, big_model, "client 1: 'model' is")) < 1500


def test_deep_nesting_big_integers_and_big_files_are_refused_naming_the_file(tmp_path, monkeypatch):
    deep = tmp_path / "deep"
    deep.write_bytes(b"\x80\x02" + b"]" * 100_000 + b"a" * 99_999 + b".")  # lists nested 100,000 deep
    assert_refused(load_plain_pickle, deep, "nested more than 8 levels deep")
    assert_refused(read_fedscale_availability, write_pickle(tmp_path / "huge", {1: behaviour([2**1024], [5])}),
                   "an integer of 1,025 bits")
    monkeypatch.setattr(device_records, "MAX_PICKLE_BYTES", 100)
    assert_refused(read_fedscale_availability, write_pickle(tmp_path / "large", {i: GOOD for i in range(10)}),
                   "more than the 100 a pickle may have")


def test_a_record_in_which_nobody_is_ever_online_is_refused(tmp_path):
    never = write_pickle(tmp_path / "never", {1: behaviour([5, 7], [5, 7]), 2: behaviour([], [])})
    assert_refused(read_fedscale_availability, never, "no client of the record's 2 is ever online")
    beyond = write_pickle(tmp_path / "beyond", {1: behaviour([150], [160], finish_time=100)})
    assert_refused(read_fedscale_availability, beyond, "no client of the record's 1 is ever online")


def test_the_format_is_told_by_content_and_a_byte_order_mark_is_read(tmp_path):
    rows = "client,start_s,end_s\n10,0,5\n2,1,2\n"
    plain = read_online_record(write_csv(tmp_path / "sessions.csv", rows))
    no_suffix = tmp_path / "sessions"
    no_suffix.write_bytes(rows.encode("utf-8-sig"))  # what spreadsheets write
    pickled = write_pickle(tmp_path / "trace.csv", {10: behaviour([0], [5])})  # a pickle, whatever its name says
    for record in (read_online_record(no_suffix), read_interval_table(no_suffix)):
        assert record.clients == plain.clients == ("2", "10")
        np.testing.assert_array_equal(record.starts, plain.starts)
    assert record_format(pickled) == "pickle" and read_online_record(pickled).clients == ("10",)
    parquet = tmp_path / "table.csv"
    pyarrow.parquet.write_table(pyarrow.table({"client": [3], "start_s": [0.0], "end_s": [1.0]}), parquet)
    assert record_format(parquet) == "parquet" and read_online_record(parquet).clients == ("3",)
    assert_refused(read_interval_table, pickled, "a pickle where a table was expected")


def test_integer_ids_are_one_client_however_written(tmp_path):
    record = read_interval_table(write_csv(tmp_path / "ids.csv", "client,start_s,end_s\n07,0,5\n7,10,12\n+7,20,21\n"))
    assert record.clients == ("7",) and len(record.starts) == 3
    assert_refused(read_fedscale_availability, write_pickle(tmp_path / "twice", {7: GOOD, "07": GOOD}),
                   "client id '7' appears twice")


def test_an_interval_table_with_a_period_repeats_like_fedscales_record(tmp_path):
    path = write_csv(tmp_path / "periodic.csv", "client,start_s,end_s,period_s\na,0,20,30\na,25,40,30\nb,5,6,10\n")
    record = read_interval_table(path)
    np.testing.assert_array_equal(record.period, [30.0, 10.0])
    np.testing.assert_array_equal(record.ends, [20.0, 30.0, 6.0])  # clipped to the period, as FedScale never gets past
    twice = write_csv(tmp_path / "two_periods.csv", "client,start_s,end_s,period_s\na,0,2,30\na,5,6,40\n")
    assert_refused(read_interval_table, twice, "client a has two periods, 30 and 40")


# numpy numbers, hostile pickles and the conversion to Parquet


def numpy_behaviour() -> dict:
    return {np.int64(1): {"active": [np.int64(0), np.int32(50)], "inactive": [np.float64(30.0), np.int64(60)],
                          "finish_time": np.float64(100.0), "duration": np.int64(100), "model": "Pixel 4a"},
            2: {"active": [np.float32(10.5)], "inactive": [np.uint16(20)], "finish_time": 100}}


def test_numpy_numbers_are_read_as_numbers(tmp_path):
    record = read_fedscale_availability(write_pickle(tmp_path / "numpy", numpy_behaviour()))
    assert record.clients == ("1", "2")
    np.testing.assert_array_equal(record.starts, [0.0, 50.0, 10.5])
    np.testing.assert_array_equal(record.ends, [30.0, 60.0, 20.0])
    capacity = read_fedscale_capacity(write_pickle(tmp_path / "capacity", {
        1: {"computation": np.float64(12.5), "communication": np.float32(1000.0)}}))
    assert capacity.computation_ms.tolist() == [12.5] and capacity.communication_kbps.tolist() == [1000.0]
    # numpy 1's module name, and protocol 2's bytes
    legacy = tmp_path / "legacy"
    legacy.write_bytes(pickle.dumps({3: {"computation": np.float64(2.0), "communication": 5.0}}, protocol=2)
                       .replace(b"numpy._core.multiarray", b"numpy.core.multiarray"))
    assert b"numpy.core.multiarray" in legacy.read_bytes() and b"_codecs" in legacy.read_bytes()
    assert read_fedscale_capacity(legacy).computation_ms.tolist() == [2.0]


NUMPY_SCALAR = np.float64(1.0).__reduce__()[0]  # numpy's scalar(dtype, bytes), whatever its module in this numpy


class ObjectScalar:
    def __reduce__(self):
        return NUMPY_SCALAR, (np.dtype("O"), b"\0" * 8)


class TamperedType:
    def __reduce__(self):
        return np.dtype, ("f8", False, True), (3, "<", None, ("x",), {"x": 0}, 8, 8, 16)


@pytest.mark.parametrize("content, fragment", [
    ({1: ObjectScalar()}, "numpy.dtype('O8', False, True) is not a numeric scalar type"),
    ({1: TamperedType()}, "is not a numeric scalar type's"),
    ({1: np.arange(3)}, "asks for the global numpy._core.multiarray._reconstruct"),
    ({1: np.dtype("f8")}, "the pickle holds a _DtypeName"),
])
def test_numpy_objects_other_than_numbers_are_refused(tmp_path, content, fragment):
    assert_refused(load_plain_pickle, write_pickle(tmp_path / "hostile", content), fragment)


def test_an_allowed_global_cannot_be_changed_by_a_pickle(tmp_path):
    names = device_records._DtypeName.NAMES
    crafted = tmp_path / "build_on_a_global"
    crafted.write_bytes(b"cnumpy\ndtype\n(dS'NAMES'\n(S'O8'\ntp0\nsb.")  # BUILD setting the allow-list's NAMES
    assert_refused(load_plain_pickle, crafted, "may not set the state of an allowed global")
    assert device_records._DtypeName.NAMES == names


def test_conversion_to_parquet_reads_what_the_pickle_says_and_refuses_hostile_pickles(tmp_path):
    from fedavail.cli import main

    source = write_pickle(tmp_path / "client_behave_trace", {**numpy_behaviour(), 0: behaviour([5], [9], 100)})
    main(["convert-device-record", "availability", str(source), "--out", str(tmp_path / "availability.parquet")])
    original, converted = read_online_record(source), read_online_record(tmp_path / "availability.parquet")
    for field in ("starts", "ends", "owner", "period", "listed"):
        np.testing.assert_array_equal(getattr(converted, field), getattr(original, field))
    assert converted.clients == original.clients
    np.testing.assert_array_equal(fedscale_clients(converted, 5, repeat=True),
                                  fedscale_clients(original, 5, repeat=True))
    capacity = write_pickle(tmp_path / "client_device_capacity", {5: {"computation": np.float64(3.0),
                                                                       "communication": 7.0}, 2: GOOD_CAPACITY})
    main(["convert-device-record", "capacity", str(capacity), "--out", str(tmp_path / "capacity.parquet")])
    table = pyarrow.parquet.read_table(tmp_path / "capacity.parquet").to_pydict()
    assert table == {"client": ["5", "2"], "computation_ms": [3.0, 80.0], "communication_kbps": [7.0, 1200.5]}
    marker = tmp_path / "ran"
    hostile = tmp_path / "hostile"
    hostile.write_bytes(pickle.dumps({1: Shell(f"touch {marker}")}))
    with pytest.raises(RecordError, match="posix.system|os.system"):
        main(["convert-device-record", "availability", str(hostile), "--out", str(tmp_path / "no.parquet")])
    assert not marker.exists() and not (tmp_path / "no.parquet").exists()


GOOD_CAPACITY = {"computation": 80.0, "communication": 1200.5}


# FedScale's mapping and reading a record at instants


def test_fedscale_maps_client_i_to_the_record_client_i_plus_1_in_file_order(tmp_path):
    record = read_interval_table(write_csv(tmp_path / "r.csv", "client,start_s,end_s\n30,0,1\n10,0,1\n20,0,1\n"))
    assert record.clients == ("10", "20", "30") and record.listed.tolist() == [2, 0, 1]
    # FedScale's client k = i + 1 plays keys[k mod 3]: keys (file order) 30, 10, 20
    assert [record.clients[c] for c in fedscale_clients(record, 4, repeat=True)] == ["10", "20", "30", "10"]
    with pytest.raises(ValueError, match="set repeat_clients: true"):
        fedscale_clients(record, 4)


def test_online_at_instants_by_hand():
    # Client 0: [10, 20] and [30, 50], no repetition; client 1: [2, 4] and [6, 9] every 10 s. Sessions are closed.
    clients = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1, 1])
    instants = np.array([9.9, 10.0, 20.0, 25.0, 50.0, 1.0, 4.0, 12.0, 15.0, 29.0])
    np.testing.assert_array_equal(online_at(TINY_PERIODIC, clients, instants),
                                  [False, True, True, False, True, False, True, True, False, True])
    assert not online_at(TINY, np.array([1]), np.array([12.0]))[0]  # no repetition without a period
    assert next_start(TINY_PERIODIC, np.array([0, 1]), 20.0) == 22.0  # client 1's next cycle
    assert next_start(TINY_PERIODIC, np.array([0]), 20.0) == 30.0
    assert next_start(TINY, np.array([0]), 30.0) == np.inf and next_start(TINY, np.array([1]), 5.0) == 6.0


def test_client_sessions_are_what_a_trace_stores_for_the_replay():
    sessions = client_sessions(TINY_PERIODIC, np.array([1, 0, 1]))
    assert sessions.clients == ("0", "1", "2")
    np.testing.assert_array_equal(sessions.owner, [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(sessions.starts, [2.0, 6.0, 10.0, 30.0, 2.0, 6.0])
    np.testing.assert_array_equal(sessions.period, [10.0, 1000.0, 10.0])


def test_a_large_csv_is_read_in_memory_near_its_size(tmp_path):
    """Columnar reading: a 37 MB table of 2 million sessions, read in a fresh process, raises its peak memory by a
    small multiple of its size: about 8 times, most of it pyarrow's parsing buffers (a dict per row took 26 times)."""
    script = (
        "import resource, sys\n"
        "import numpy, pyarrow, pyarrow.csv, pyarrow.parquet\n"
        "from fedavail.availability.device_records import read_online_record\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "record = read_online_record(sys.argv[1])\n"
        "print(len(record.clients), (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)\n")
    rng = np.random.default_rng(0)
    starts = rng.integers(0, 170_000, 2_000_000)
    table = pyarrow.table({"client": rng.integers(0, 50_000, len(starts)), "start_s": starts,
                           "end_s": starts + rng.integers(1, 3600, len(starts))})
    pyarrow.csv.write_csv(table, tmp_path / "large.csv")
    size = (tmp_path / "large.csv").stat().st_size
    clients, grown = map(int, subprocess.run([sys.executable, "-c", script, str(tmp_path / "large.csv")], check=True,
                                             capture_output=True, text=True).stdout.split())
    assert clients == 50_000 and grown < 12 * size, (grown, size)
