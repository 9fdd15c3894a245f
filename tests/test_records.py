"""Recorded device availability (fedavail.availability.records): FedScale's pickles and interval tables read exactly,
every malformed or unsafe file refused naming the file, online time and per-window availability checked by hand, the
client draw, and the example-record generator."""

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
import pyarrow.parquet
import pytest

from fedavail.availability.records import (OnlineRecord, RecordError, available_in_windows, draw_clients,
                                           load_plain_pickle, online_seconds, read_capacity_table,
                                           read_fedscale_availability, read_fedscale_capacity, read_interval_table,
                                           round_windows, session_lengths)

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
    np.testing.assert_array_equal(session_lengths(record), [5.0, 40.0, 30.0, 50.0])


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
    code = ("import sys, fedavail.availability.records; "
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
    ({"computation": 0.0, "communication": 5.0}, "client 4: 'computation' is 0.0"),
    ({"computation": float("nan"), "communication": 5.0}, "client 4: 'computation' is nan"),
    ({"computation": 10.0, "communication": "fast"}, "client 4: 'communication' is 'fast'"),
])
def test_malformed_fedscale_capacity_is_refused(tmp_path, entry, fragment):
    path = write_pickle(tmp_path / "client_device_capacity", {4: entry})
    assert_refused(read_fedscale_capacity, path, fragment, "client_device_capacity layout")


@pytest.mark.parametrize("name, text, fragments", [
    ("missing.csv", "client,start_s,stop_s\n1,0,5\n", ("no column end_s", "it has client, start_s, stop_s")),
    ("negative.csv", "client,start_s,end_s\n1,0,5\n2,-1,5\n", ("row 1", "client 2", "negative or inverted")),
    ("inverted.csv", "client,start_s,end_s\n1,6,5\n", ("row 0", "client 1", "negative or inverted")),
    ("word.csv", "client,start_s,end_s\n1,soon,5\n", ("row 0: start_s is 'soon'",)),
    ("nan.csv", "client,start_s,end_s\n1,0,nan\n", ("row 0: end_s is 'nan'",)),
    ("short.csv", "client,start_s,end_s\n1,0\n", ("row 0: end_s is None",)),
    ("no_client.csv", "client,start_s,end_s\n ,0,5\n", ("row 0: client ' '",)),
    ("empty.csv", "client,start_s,end_s\n", ("no rows",)),
    ("blank.csv", "", ("no column client, start_s, end_s", "it has none")),
    ("sessions.txt", "client,start_s,end_s\n1,0,5\n", ("unknown suffix '.txt'", ".csv, .parquet, .pq")),
])
def test_malformed_interval_tables_are_refused(tmp_path, name, text, fragments):
    assert_refused(read_interval_table, write_csv(tmp_path / name, text), *fragments, "client, start_s, end_s")


def test_malformed_parquet_and_capacity_tables_are_refused(tmp_path):
    pyarrow.parquet.write_table(pyarrow.table({"client": ["1"], "start_s": [0.0]}), tmp_path / "short.parquet")
    assert_refused(read_interval_table, tmp_path / "short.parquet", "no column end_s", "it has client, start_s")
    damaged = tmp_path / "damaged.parquet"
    damaged.write_bytes(b"PAR1 not really")
    assert_refused(read_interval_table, damaged, "not a readable table")
    twice = write_csv(tmp_path / "twice.csv", "client,computation_ms,communication_kbps\n1,5,5\n1,6,6\n")
    assert_refused(read_capacity_table, twice, "client 1 has rows 0 and 1")
    zero = write_csv(tmp_path / "zero.csv", "client,computation_ms,communication_kbps\n1,5,0\n")
    assert_refused(read_capacity_table, zero, "row 0: client 1", "numbers > 0")


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
    assert (record.starts >= 0).all() and (record.ends <= 86400).all() and (session_lengths(record) > 0).all()
    capacity = read_fedscale_capacity(tmp_path / "first/example_client_device_capacity")
    assert capacity.clients == record.clients
    assert (capacity.computation_ms > 0).all() and (capacity.communication_kbps > 0).all()
    assert "generated" in (tmp_path / "first/README.md").read_text().lower()


def test_the_shipped_example_records_are_what_the_generator_writes(tmp_path):
    generator_main()(["--out-dir", str(tmp_path)])
    for name in ("example_client_behave_trace", "example_client_device_capacity", "README.md"):
        assert (tmp_path / name).read_bytes() == (ROOT / "data/recorded" / name).read_bytes(), name
