"""Recorded device availability: FedScale's per-client behaviour and device-capacity pickles (FedScale, arXiv
2105.11367) and plain interval tables (CSV or Parquet), read into online sessions per client and turned into whether
each client is online through each round's time window.

Only the standard library and numpy load with this module; pyarrow loads when a Parquet table is read."""

import csv
import math
import os
import pickle
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BEHAVE_LAYOUT = ("FedScale's client_behave_trace layout: a pickled dict {client_id: {'active': [start_s, ...], "
                 "'inactive': [end_s, ...], 'finish_time': period_s, 'duration': s, 'model': str}} with one inactive "
                 "time per active time, 0 <= active[j] <= inactive[j], finish_time > 0 ('duration', 'model' optional)")
CAPACITY_LAYOUT = ("FedScale's client_device_capacity layout: a pickled dict {client_id: {'computation': "
                   "ms_per_sample, 'communication': kbit_per_s}} with both numbers finite and > 0")
INTERVAL_COLUMNS = ("client", "start_s", "end_s")
CAPACITY_COLUMNS = ("client", "computation_ms", "communication_kbps")
TABLE_SUFFIXES = (".csv", ".parquet", ".pq")
_INTEGER_ID = re.compile(r"[+-]?[0-9]+")


class RecordError(ValueError):
    """A device record that cannot be read or does not have the layout it should have."""

    def __init__(self, path: str | os.PathLike, problem: str):
        super().__init__(f"unusable device record: {path}: {problem}")
        self.path = Path(path)


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles only what needs no global: dicts, lists, tuples, sets, numbers, strings, bytes, None."""

    def __init__(self, file, path: Path):
        super().__init__(file)
        self._path = path

    def find_class(self, module, name):
        # Every global is refused, so a record can never make unpickling import or call anything.
        raise RecordError(self._path, f"the pickle asks for the global {module}.{name}; a device record must hold "
                                      "only plain dicts, lists, numbers and strings")


def load_plain_pickle(path: str | os.PathLike) -> object:
    """Unpickle `path` allowing no global at all; any failure is a RecordError naming the file."""
    path = Path(path)
    with open(path, "rb") as file:  # a missing file stays FileNotFoundError
        try:
            return _PlainUnpickler(file, path).load()
        except RecordError:
            raise
        except Exception as error:  # truncated, not a pickle, bad opcode, persistent id: all mean a damaged file
            raise RecordError(path, f"not a readable pickle ({type(error).__name__}: {error}); a device record is a "
                                    "pickle of plain dicts, lists, numbers and strings") from error


@dataclass(frozen=True, eq=False)  # eq=False: a generated __eq__ or __hash__ cannot compare arrays
class OnlineRecord:
    """Each record client's online sessions, in seconds from the record's start."""

    clients: tuple[str, ...]  # the record's client ids: numeric order when all are integers, else string order
    starts: np.ndarray  # float64 [k] session start, s
    ends: np.ndarray  # float64 [k] session end, s
    owner: np.ndarray  # int64 [k] index into clients; sorted by (owner, start), no two sessions of a client touch
    period: np.ndarray | None  # float64 [c] FedScale's finish_time: the record repeats with it; None: no repetition


@dataclass(frozen=True, eq=False)
class DeviceCapacity:
    """Each record client's training speed and network speed."""

    clients: tuple[str, ...]
    computation_ms: np.ndarray  # float64 [c] ms per sample (FedScale's 'computation')
    communication_kbps: np.ndarray  # float64 [c] kbit/s (FedScale's 'communication')


def _is_number(value) -> bool:
    return type(value) in (int, float)  # bool is no number here; a plain pickle holds no other numeric type


def _client_id(path: Path, key, layout: str) -> str:
    if type(key) not in (int, str) or (type(key) is str and not key.strip()):
        raise RecordError(path, f"client id {key!r} is not an integer or a non-empty string; expected {layout}")
    return str(key).strip()


def _client_order(ids) -> list[str]:
    if all(_INTEGER_ID.fullmatch(client) for client in ids):
        return sorted(ids, key=lambda client: (int(client), client))
    return sorted(ids)


def _plain_dict(path: Path, layout: str) -> dict[str, dict]:
    """The record's top-level dict with client ids as strings, in client order."""
    record = load_plain_pickle(path)
    if type(record) is not dict or not record:
        what = "an empty dict" if type(record) is dict else f"a {type(record).__name__}"
        raise RecordError(path, f"the pickle holds {what}; expected {layout}")
    by_id = {}
    for key, value in record.items():
        client = _client_id(path, key, layout)
        if client in by_id:
            raise RecordError(path, f"client id {client!r} appears twice (as {key!r} and another key); "
                                    f"expected {layout}")
        if type(value) is not dict:
            raise RecordError(path, f"client {client}: the value is a {type(value).__name__}, not a dict; "
                                    f"expected {layout}")
        by_id[client] = value
    return {client: by_id[client] for client in _client_order(by_id)}


def _number_list(path: Path, client: str, key: str, value) -> np.ndarray:
    if type(value) not in (list, tuple) or not all(_is_number(v) for v in value):
        raise RecordError(path, f"client {client}: {key!r} is not a list of numbers; expected {BEHAVE_LAYOUT}")
    array = np.asarray(value, dtype=np.float64) if value else np.empty(0)
    if not np.isfinite(array).all() or (array < 0).any():
        raise RecordError(path, f"client {client}: {key!r} holds a negative or non-finite time; "
                                f"expected {BEHAVE_LAYOUT}")
    return array


def _positive_number(path: Path, client: str, key: str, value, layout: str) -> float:
    if not _is_number(value) or not math.isfinite(value) or value <= 0:
        raise RecordError(path, f"client {client}: {key!r} is {value!r}, not a finite number > 0; expected {layout}")
    return float(value)


def _client_sessions(path: Path, client: str, entry: dict) -> tuple[np.ndarray, np.ndarray, float]:
    for key in ("active", "inactive", "finish_time"):
        if key not in entry:
            raise RecordError(path, f"client {client}: no {key!r} key (it has {sorted(map(str, entry))}); "
                                    f"expected {BEHAVE_LAYOUT}")
    starts = _number_list(path, client, "active", entry["active"])
    ends = _number_list(path, client, "inactive", entry["inactive"])
    if len(starts) != len(ends):
        raise RecordError(path, f"client {client}: 'active' has {len(starts)} times but 'inactive' {len(ends)}; "
                                f"expected {BEHAVE_LAYOUT}")
    if (ends < starts).any():
        j = int(np.flatnonzero(ends < starts)[0])
        raise RecordError(path, f"client {client}: session {j} ends (inactive {entry['inactive'][j]!r}) before it "
                                f"starts (active {entry['active'][j]!r}); expected {BEHAVE_LAYOUT}")
    period = _positive_number(path, client, "finish_time", entry["finish_time"], BEHAVE_LAYOUT)
    if "duration" in entry and not _is_number(entry["duration"]):
        raise RecordError(path, f"client {client}: 'duration' is {entry['duration']!r}, not a number; "
                                f"expected {BEHAVE_LAYOUT}")
    if "model" in entry and type(entry["model"]) is not str:
        raise RecordError(path, f"client {client}: 'model' is {entry['model']!r}, not a string; "
                                f"expected {BEHAVE_LAYOUT}")
    # FedScale replays the record at (time mod finish_time), so whatever lies past finish_time is never reached.
    return np.minimum(starts, period), np.minimum(ends, period), period


def _merged(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One client's sessions sorted, with touching or overlapping ones joined and zero-length ones (never online for
    any positive time) dropped."""
    keep = ends > starts
    order = np.argsort(starts[keep], kind="stable")
    starts, ends = starts[keep][order], ends[keep][order]
    if len(starts) == 0:
        return starts, ends
    reach = np.maximum.accumulate(ends)
    first = np.concatenate([[0], np.flatnonzero(starts[1:] > reach[:-1]) + 1])
    return starts[first], np.maximum.reduceat(ends, first)


def _online_record(sessions: dict[str, tuple[np.ndarray, np.ndarray]], period: np.ndarray | None) -> OnlineRecord:
    merged = [_merged(starts, ends) for starts, ends in sessions.values()]
    counts = [len(starts) for starts, _ in merged]
    empty = np.empty(0)
    return OnlineRecord(tuple(sessions),
                        np.concatenate([starts for starts, _ in merged] + [empty]),
                        np.concatenate([ends for _, ends in merged] + [empty]),
                        np.repeat(np.arange(len(merged), dtype=np.int64), counts),
                        period)


def read_fedscale_availability(path: str | os.PathLike) -> OnlineRecord:
    """FedScale's client_behave_trace: client i is online over [active[j], inactive[j]], repeating every
    finish_time seconds."""
    path = Path(path)
    sessions, periods = {}, []
    for client, entry in _plain_dict(path, BEHAVE_LAYOUT).items():
        starts, ends, period = _client_sessions(path, client, entry)
        sessions[client] = (starts, ends)
        periods.append(period)
    return _online_record(sessions, np.asarray(periods, dtype=np.float64))


def read_fedscale_capacity(path: str | os.PathLike) -> DeviceCapacity:
    """FedScale's client_device_capacity: ms per sample and kbit/s per client."""
    path = Path(path)
    record = _plain_dict(path, CAPACITY_LAYOUT)
    values = {key: [] for key in ("computation", "communication")}
    for client, entry in record.items():
        for key, column in values.items():
            if key not in entry:
                raise RecordError(path, f"client {client}: no {key!r} key (it has {sorted(map(str, entry))}); "
                                        f"expected {CAPACITY_LAYOUT}")
            column.append(_positive_number(path, client, key, entry[key], CAPACITY_LAYOUT))
    return DeviceCapacity(tuple(record), np.asarray(values["computation"], dtype=np.float64),
                          np.asarray(values["communication"], dtype=np.float64))


def _table_layout(columns: tuple[str, ...]) -> str:
    return f"a table ({' or '.join(TABLE_SUFFIXES)}) with the columns {', '.join(columns)}"


def _read_columns(path: Path, columns: tuple[str, ...]) -> dict[str, list]:
    """The named columns of a CSV or Parquet table as lists (CSV: strings; Parquet: the stored values)."""
    layout = _table_layout(columns)
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise RecordError(path, f"unknown suffix {path.suffix!r}: a table must end in {', '.join(TABLE_SUFFIXES)}; "
                                f"expected {layout}")
    try:
        if suffix == ".csv":
            with open(path, newline="", encoding="utf-8") as file:
                reader = csv.DictReader(file)
                has = tuple(reader.fieldnames or ())
                rows = list(reader) if set(columns) <= set(has) else []
            table = {name: [row[name] for row in rows] for name in columns if name in has}
        else:
            import pyarrow.parquet  # only Parquet readers pay for pyarrow

            stored = pyarrow.parquet.read_table(path)
            has = tuple(stored.column_names)
            table = {name: stored.column(name).to_pylist() for name in columns if name in has}
    except FileNotFoundError:
        raise
    except Exception as error:  # bad encoding, broken CSV quoting, damaged Parquet: the file is not a readable table
        raise RecordError(path, f"not a readable table ({type(error).__name__}: {error}); expected {layout}") from error
    missing = [name for name in columns if name not in has]
    if missing:
        raise RecordError(path, f"no column {', '.join(missing)} (it has {', '.join(has) or 'none'}); "
                                f"expected {layout}")
    if not table[columns[0]]:
        raise RecordError(path, f"the table has no rows; expected {layout}")
    return table


def _table_clients(path: Path, values: list, layout: str) -> list[str]:
    for row, value in enumerate(values):
        if type(value) not in (int, str) or not str(value).strip():
            raise RecordError(path, f"row {row}: client {value!r} is not an integer or a non-empty string; "
                                    f"expected {layout}")
    return [str(value).strip() for value in values]


def _table_numbers(path: Path, name: str, values: list, layout: str) -> np.ndarray:
    numbers = np.empty(len(values))
    for row, value in enumerate(values):
        try:
            numbers[row] = float(value) if type(value) is str or _is_number(value) else math.nan
        except (ValueError, OverflowError):
            numbers[row] = math.nan
        if not math.isfinite(numbers[row]):
            raise RecordError(path, f"row {row}: {name} is {value!r}, not a finite number; expected {layout}")
    return numbers


def read_interval_table(path: str | os.PathLike) -> OnlineRecord:
    """A table of online sessions, one row each: client, start_s, end_s (0 <= start_s <= end_s); no repetition."""
    path = Path(path)
    layout = _table_layout(INTERVAL_COLUMNS)
    table = _read_columns(path, INTERVAL_COLUMNS)
    clients = _table_clients(path, table["client"], layout)
    starts = _table_numbers(path, "start_s", table["start_s"], layout)
    ends = _table_numbers(path, "end_s", table["end_s"], layout)
    bad = np.flatnonzero((starts < 0) | (ends < starts))
    if len(bad):
        row = int(bad[0])
        raise RecordError(path, f"row {row}: session of client {clients[row]} from {starts[row]} to {ends[row]} s "
                                f"is negative or inverted; expected {layout}, 0 <= start_s <= end_s")
    rows_of = {}
    for row, client in enumerate(clients):
        rows_of.setdefault(client, []).append(row)
    sessions = {client: (starts[rows_of[client]], ends[rows_of[client]]) for client in _client_order(rows_of)}
    return _online_record(sessions, None)


def read_capacity_table(path: str | os.PathLike) -> DeviceCapacity:
    """A table of device capacities, one row per client: client, computation_ms, communication_kbps (both > 0)."""
    path = Path(path)
    layout = _table_layout(CAPACITY_COLUMNS) + ", one row per client, numbers > 0"
    table = _read_columns(path, CAPACITY_COLUMNS)
    clients = _table_clients(path, table["client"], layout)
    computation = _table_numbers(path, "computation_ms", table["computation_ms"], layout)
    communication = _table_numbers(path, "communication_kbps", table["communication_kbps"], layout)
    row_of = {}
    for row, client in enumerate(clients):
        if client in row_of:
            raise RecordError(path, f"client {client} has rows {row_of[client]} and {row}; expected {layout}")
        if computation[row] <= 0 or communication[row] <= 0:
            raise RecordError(path, f"row {row}: client {client} has computation_ms {computation[row]} and "
                                    f"communication_kbps {communication[row]}; expected {layout}")
        row_of[client] = row
    order = [row_of[client] for client in _client_order(row_of)]
    return DeviceCapacity(tuple(clients[row] for row in order), computation[order], communication[order])


def is_table(path: str | os.PathLike) -> bool:
    """A CSV or Parquet table by its suffix; any other file is read as a FedScale pickle."""
    return Path(path).suffix.lower() in TABLE_SUFFIXES


def read_online_record(path: str | os.PathLike) -> OnlineRecord:
    """The online sessions of `path`: an interval table (by suffix) or FedScale's client_behave_trace."""
    return read_interval_table(path) if is_table(path) else read_fedscale_availability(path)


def read_device_capacity(path: str | os.PathLike) -> DeviceCapacity:
    """The device capacities of `path`: a capacity table (by suffix) or FedScale's client_device_capacity."""
    return read_capacity_table(path) if is_table(path) else read_fedscale_capacity(path)


def draw_clients(record_clients: int, num_clients: int, rng: np.random.Generator, repeat: bool = False) -> np.ndarray:
    """int64 [num_clients]: the record client that plays each partition client, drawn uniformly without replacement;
    with `repeat`, a record with too few clients is dealt out in whole shuffled rounds, so each record client plays
    ⌊m/c⌋ or ⌈m/c⌉ partition clients."""
    if record_clients < 1 or num_clients < 1:
        raise ValueError(f"drawing clients needs record_clients >= 1 and num_clients >= 1, got {record_clients} and "
                         f"{num_clients}")
    if record_clients < num_clients and not repeat:
        raise ValueError(f"the record has {record_clients} clients but the partition {num_clients}; set repeat to let "
                         "record clients play several partition clients, or use fewer clients")
    rounds = -(-num_clients // record_clients)
    drawn = np.concatenate([rng.permutation(record_clients) for _ in range(rounds)])
    return drawn[:num_clients].astype(np.int64)


def online_seconds(record: OnlineRecord, client: int, times: np.ndarray) -> np.ndarray:
    """float64, shaped like `times`: the seconds record client `client` is online in [0, x) for each x >= 0."""
    if not 0 <= client < len(record.clients):
        raise ValueError(f"record client {client} does not exist: the record has {len(record.clients)} clients")
    times = np.asarray(times, dtype=np.float64)
    if not np.isfinite(times).all() or (times < 0).any():
        raise ValueError("online_seconds needs finite times >= 0")
    first, last = np.searchsorted(record.owner, [client, client + 1])
    starts, ends = record.starts[first:last], record.ends[first:last]
    before = np.concatenate([[0.0], np.cumsum(ends - starts)])  # before[n]: online seconds of the first n sessions

    def within(x: np.ndarray) -> np.ndarray:
        begun = np.searchsorted(starts, x, side="left")  # sessions that start before x
        running = np.where(begun > 0, np.maximum(ends[begun - 1] - x, 0.0), 0.0) if len(starts) else 0.0
        return before[begun] - running  # the last begun session counts only up to x

    if record.period is None:
        return within(times)
    period = record.period[client]
    cycles, rest = np.divmod(times, period)
    return cycles * before[-1] + within(rest)  # sessions were clipped to the period, so before[-1] is F(period)


def available_in_windows(record: OnlineRecord, chosen: np.ndarray, window_starts: np.ndarray,
                         window_ends: np.ndarray, min_share: float) -> np.ndarray:
    """bool [T, m]: partition client j, played by record client chosen[j], is available in window t when it is online
    for at least min_share of [window_starts[t], window_ends[t])."""
    if not 0 < min_share <= 1:
        raise ValueError(f"min_share must lie in (0, 1], got {min_share}")
    chosen = np.asarray(chosen, dtype=np.int64)
    window_starts = np.asarray(window_starts, dtype=np.float64)
    window_ends = np.asarray(window_ends, dtype=np.float64)
    if window_starts.ndim != 1 or window_starts.shape != window_ends.shape or not (window_ends > window_starts).all():
        raise ValueError("window_starts and window_ends must be 1-d, of one length, with every end after its start")
    length = window_ends - window_starts
    needed = min_share * length - 1e-9 * length  # the tolerance absorbs float rounding of the prefix sums
    available = np.zeros((len(window_starts), len(chosen)), dtype=bool)
    for client in np.unique(chosen):
        online = online_seconds(record, int(client), window_ends) - online_seconds(record, int(client), window_starts)
        available[:, chosen == client] = (online >= needed)[:, None]
    return available


def round_windows(rounds: int, round_seconds: float, start_s: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) float64 [rounds]: round t covers [start_s + t·round_seconds, start_s + (t + 1)·round_seconds)."""
    if rounds < 0 or not round_seconds > 0 or not start_s >= 0:
        raise ValueError(f"round windows need rounds >= 0, round_seconds > 0 and start_s >= 0, got {rounds}, "
                         f"{round_seconds} and {start_s}")
    steps = np.arange(rounds + 1, dtype=np.float64)
    edges = start_s + steps * round_seconds
    return edges[:-1], edges[1:]


def session_lengths(record: OnlineRecord) -> np.ndarray:
    """float64 [k]: the length of each (merged) online session, s."""
    return record.ends - record.starts
