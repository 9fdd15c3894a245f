"""Recorded device availability: FedScale's per-client behaviour and device-capacity pickles (FedScale, arXiv
2105.11367) and plain tables of online intervals and capacities (CSV or Parquet), read into online sessions per client;
a client's online time over windows (the `window` rule of the recorded trace model) and whether it is online at given
instants (the `fedscale` replay, fedavail.availability.replay).

A record is untrusted input. Its format is told by its content, not its name; pickles are read by an unpickler that
builds nothing but plain values (and numpy's numeric scalars, through an allow-list that checks them), within limits on
file size, nesting depth, value count and integer size; every message quotes values cut short; tables are read column
by column (pyarrow), in memory near the file's size. Only the standard library and numpy load with this module;
pyarrow loads when a table is read or written."""

import csv
import io
import math
import os
import pickle
import re
import reprlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BEHAVE_LAYOUT = ("FedScale's client_behave_trace layout: a pickled dict {client_id: {'active': [start_s, ...], "
                 "'inactive': [end_s, ...], 'finish_time': period_s, 'duration': s, 'model': str}} with one inactive "
                 "time per active time, 0 <= active[j] <= inactive[j], finish_time > 0 ('duration', 'model' optional)")
CAPACITY_LAYOUT = ("FedScale's client_device_capacity layout: a pickled dict {client_id: {'computation': "
                   "ms_per_sample, 'communication': kbit_per_s}}")
INTERVAL_COLUMNS = ("client", "start_s", "end_s")
PERIOD_COLUMN = "period_s"  # optional in an interval table: the client's record repeats with it, as finish_time does
CAPACITY_COLUMNS = ("client", "computation_ms", "communication_kbps")
PARQUET_MAGIC = b"PAR1"
PICKLE_MAGIC = b"\x80"  # every pickle of protocol 2 or later (what Python 3 writes) starts with PROTO

# Limits on what a record may make this process do. A pickle becomes Python objects of about ten times its size, so
# pickles are held to MAX_PICKLE_BYTES; tables are read columnar (about their own size). Nesting: FedScale's layouts
# need 3 levels (dict, dict, list). Values: every number, string and container counted as often as it is reached (a
# small pickle can reach one list a million times); MAX_RECORD_VALUES float64 numbers are 800 MB. Integers: 64 bits.
MAX_PICKLE_BYTES = 512 * 2**20
MAX_TABLE_BYTES = 8 * 2**30
MAX_DEPTH = 8
MAX_RECORD_VALUES = 100_000_000
MAX_INTEGER_BITS = 63
MAX_TIME_S = 1e12  # about 31,700 years: a time beyond it is no record of devices
MAX_CLIENT_ID_LENGTH = 200
# Plausible device capacities: 10^-6 to 10^6 ms per training sample, 10^-3 to 10^9 kbit/s (1 bit/s to 1 Tbit/s).
# Outside them a capacity is nonsense (1e-300 kbit/s would make a round last 10^300 s).
COMPUTATION_MS_RANGE = (1e-6, 1e6)
COMMUNICATION_KBPS_RANGE = (1e-3, 1e9)
MAX_PROBLEM_LENGTH = 1000  # characters of a RecordError's problem
_INTEGER_ID = re.compile(r"[+-]?[0-9]+")
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxlong, _SHOWN.maxother = 2, 40, 40, 40
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = _SHOWN.maxset = _SHOWN.maxfrozenset = 4


class RecordError(ValueError):
    """A device record that cannot be read or does not have the layout it should have; the message is bounded."""

    def __init__(self, path: str | os.PathLike, problem: str):
        if len(problem) > MAX_PROBLEM_LENGTH:
            problem = f"{problem[:MAX_PROBLEM_LENGTH]}… ({len(problem):,} characters)"
        super().__init__(f"unusable device record: {path}: {problem}")
        self.path = Path(path)


def shown(value) -> str:
    """repr(value) cut short at every level (a record's values may be huge or share one list a million times)."""
    return _SHOWN.repr(value)


def _cut(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…"


def _names(names: list) -> str:
    """At most 8 names, each cut short."""
    return ", ".join([_cut(str(name), 40) for name in names[:8]] + ["…"] * (len(names) > 8))


def _keys(entry: dict) -> str:
    return _names(sorted(map(str, list(entry)[:9])))


def record_format(path: str | os.PathLike) -> str:
    """'parquet', 'pickle' or 'csv', from the file's first bytes (its name says nothing); RecordError for an empty
    file, FileNotFoundError for a missing one."""
    path = Path(path)
    with open(path, "rb") as file:
        head = file.read(len(PARQUET_MAGIC))
    if not head:
        raise RecordError(path, "the file is empty")
    if head == PARQUET_MAGIC:
        return "parquet"
    return "pickle" if head.startswith(PICKLE_MAGIC) else "csv"


def _check_size(path: Path, limit: int, what: str) -> None:
    size = path.stat().st_size
    if size > limit:
        raise RecordError(path, f"{size:,} bytes, more than the {limit:,} a {what} may have (its contents would not "
                                "fit in memory); write its clients to a CSV or Parquet table in parts")


# Pickles


class _DtypeName:
    """What the allow-list makes of numpy.dtype(name, align, copy) in a pickle: a numeric type's name and byte order,
    never a numpy dtype (whose state a pickle could set to anything)."""

    NAMES = ("b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8")

    def __init__(self, name, align=False, copy=True):
        if name not in self.NAMES or not isinstance(align, bool) or not isinstance(copy, bool):
            raise pickle.UnpicklingError(f"numpy.dtype{shown((name, align, copy))} is not a numeric scalar type")
        self.name, self.order = name, "="

    def __setstate__(self, state):
        # numpy's own state of a plain numeric dtype: (3, byte order, no subarray, names or fields, -1, -1, 0)
        if (type(state) is not tuple or len(state) != 8 or state[0] != 3 or state[1] not in ("<", ">", "|", "=")
                or state[2:5] != (None, None, None) or state[5:] != (-1, -1, 0)):
            raise pickle.UnpicklingError(f"numpy.dtype state {shown(state)} is not a numeric scalar type's")
        self.order = state[1]


def _numpy_scalar(dtype, payload):
    """numpy's scalar(dtype, bytes) as a plain Python bool, int or float."""
    if type(dtype) is not _DtypeName or type(payload) is not bytes:
        raise pickle.UnpicklingError("numpy scalar: not a numeric type and its bytes")
    numpy_type = np.dtype(dtype.name).newbyteorder(dtype.order)
    if len(payload) != numpy_type.itemsize:
        raise pickle.UnpicklingError(f"numpy scalar of type {dtype.name}: {len(payload)} bytes")
    return np.frombuffer(payload, dtype=numpy_type)[0].item()


def _latin1_bytes(text, encoding):
    """_codecs.encode(text, 'latin1'): how protocol 2 pickles bytes."""
    if type(text) is not str or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("_codecs.encode: only text to latin1 bytes")
    return text.encode("latin1")


class _Builder:
    """A global the allow-list admits, as the unpickler hands it out: it can be called and nothing else. It has no
    attributes to set: a pickle's BUILD opcode on it is refused, so a record cannot change the builders it is given."""

    __slots__ = ("_build",)

    def __init__(self, build):
        self._build = build

    def __call__(self, *args):
        return self._build(*args)

    def __setstate__(self, state):
        raise pickle.UnpicklingError("a record may not set the state of an allowed global")


# The only globals a record may name: numpy's numeric scalars (numpy 1 and 2 module names), checked by the builders
# above, and protocol 2's bytes. Nothing else can be imported or called.
_ALLOWED_GLOBALS = {("numpy", "dtype"): _DtypeName, ("numpy.core.multiarray", "scalar"): _numpy_scalar,
                    ("numpy._core.multiarray", "scalar"): _numpy_scalar, ("_codecs", "encode"): _latin1_bytes}
_PLAIN_TYPES = (int, float, str, bytes, bool, type(None))
_CONTAINERS = (dict, list, tuple, set, frozenset)


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles plain dicts, lists, tuples, sets, numbers, strings, bytes and None, and numpy's numeric scalars as
    Python numbers; every other global is refused."""

    def __init__(self, file, path: Path):
        super().__init__(file)
        self._path = path

    def find_class(self, module, name):
        allowed = _ALLOWED_GLOBALS.get((module, name))
        if allowed is None:  # refused before anything is imported or called
            raise RecordError(self._path, f"the pickle asks for the global {shown(module)[1:-1]}.{shown(name)[1:-1]}; "
                                          "a device record holds only plain dicts, lists, numbers and strings (numpy "
                                          "numbers are read as numbers); convert other files as "
                                          "docs/recorded-availability.md says")
        return _Builder(allowed)


def _check_plain(path: Path, value) -> None:
    """The loaded value's nesting depth, value count (counted as reached) and integers within the limits, and nothing
    but plain values in it. Recursion is bounded by MAX_DEPTH; a container reached again is measured once."""
    measured: dict[int, tuple[int, int]] = {}  # id -> (values reached from it, its height)

    def plain(item) -> None:
        kind = type(item)
        if kind is int and item.bit_length() > MAX_INTEGER_BITS:
            raise RecordError(path, f"an integer of {item.bit_length():,} bits, more than {MAX_INTEGER_BITS}")
        if kind not in _PLAIN_TYPES:
            raise RecordError(path, f"the pickle holds a {kind.__name__}; a device record holds only plain dicts, "
                                    "lists, numbers and strings")

    def measure(item, depth: int) -> tuple[int, int]:
        """(values reached from the container `item`, its height), `item` at nesting level `depth`."""
        if id(item) not in measured:
            if depth > MAX_DEPTH:
                raise RecordError(path, f"values nested more than {MAX_DEPTH} levels deep")
            count, height = 1, 1
            for child in (v for pair in item.items() for v in pair) if type(item) is dict else item:
                if type(child) in _CONTAINERS:
                    reached, below = measure(child, depth + 1)
                    count, height = count + reached, max(height, below + 1)
                    if count > MAX_RECORD_VALUES:
                        raise RecordError(path, f"more than {MAX_RECORD_VALUES:,} values (counted as often as they "
                                                "are reached)")
                else:  # checked inline, with no call per value: a record holds millions of numbers
                    kind = type(child)
                    if kind not in _PLAIN_TYPES or kind is int and child.bit_length() > MAX_INTEGER_BITS:
                        plain(child)  # raises, naming the problem
                    count += 1
            measured[id(item)] = count, height
        count, height = measured[id(item)]
        if depth + height - 1 > MAX_DEPTH:
            raise RecordError(path, f"values nested more than {MAX_DEPTH} levels deep")
        return count, height

    if type(value) in _CONTAINERS:
        measure(value, 1)
    else:
        plain(value)


def load_plain_pickle(path: str | os.PathLike) -> object:
    """Unpickle `path` allowing no global but numpy's numeric scalars, within the limits above; any failure is a
    RecordError naming the file (a missing file stays FileNotFoundError)."""
    path = Path(path)
    with open(path, "rb") as file:
        _check_size(path, MAX_PICKLE_BYTES, "pickle")
        try:
            value = _PlainUnpickler(file, path).load()
        except RecordError:
            raise
        except Exception as error:  # truncated, not a pickle, bad opcode, persistent id: all mean a damaged file
            raise RecordError(path, f"not a readable pickle ({type(error).__name__}: {_cut(str(error))}); a device "
                                    "record is a pickle of plain dicts, lists, numbers and strings") from error
    _check_plain(path, value)
    return value


# Records


@dataclass(frozen=True, eq=False)  # eq=False: a generated __eq__ or __hash__ cannot compare arrays
class OnlineRecord:
    """Each record client's online sessions, in seconds from the record's start."""

    clients: tuple[str, ...]  # the record's client ids: numeric order when all are integers, else string order
    starts: np.ndarray  # float64 [k] session start, s
    ends: np.ndarray  # float64 [k] session end, s
    owner: np.ndarray  # int64 [k] index into clients; sorted by (owner, start), no two sessions of a client touch
    period: np.ndarray | None  # float64 [c] FedScale's finish_time: the record repeats with it; None: no repetition
    listed: np.ndarray | None = None  # int64 [c] the clients in the file's order (indices into clients); None: same


@dataclass(frozen=True, eq=False)
class DeviceCapacity:
    """Each record client's training speed and network speed."""

    clients: tuple[str, ...]
    computation_ms: np.ndarray  # float64 [c] ms per sample (FedScale's 'computation')
    communication_kbps: np.ndarray  # float64 [c] kbit/s (FedScale's 'communication')
    listed: np.ndarray | None = None  # int64 [c] the clients in the file's order; None: in client order


def file_order(record: OnlineRecord | DeviceCapacity) -> np.ndarray:
    """int64 [c]: the record's clients in the order its file lists them (indices into record.clients)."""
    return np.arange(len(record.clients)) if record.listed is None else record.listed


def _is_number(value) -> bool:
    return type(value) in (int, float)  # bool is no number here; numpy numbers were read as Python numbers


def _client_id(path: Path, key, layout: str) -> str:
    """A client id as text: integers in their plain form (7, "07" and "+7" are one client), names stripped; a
    non-integer number ("1.0", "1e3", "nan") is refused, as it cannot tell whether "1" and "1.0" are one device."""
    text = str(key).strip() if type(key) in (int, str) else None
    if not text or len(text) > MAX_CLIENT_ID_LENGTH:
        raise RecordError(path, f"client id {shown(key)} is not an integer or a non-empty string of at most "
                                f"{MAX_CLIENT_ID_LENGTH} characters; expected {layout}")
    if _INTEGER_ID.fullmatch(text):
        return str(int(text))
    try:
        float(text)
    except ValueError:
        return text
    raise RecordError(path, f"client id {shown(key)} is a number but not an integer: write integer ids without a "
                            f"decimal point or exponent, so that one device has one id; expected {layout}")


def _client_order(ids) -> list[str]:
    if all(_INTEGER_ID.fullmatch(client) for client in ids):
        return sorted(ids, key=int)
    return sorted(ids)


def _merged(owner: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, ...]:
    """Every client's sessions sorted, with touching or overlapping ones joined and zero-length ones (never online for
    any positive time) dropped: (owner, starts, ends), sorted by (owner, start). Vectorised over all clients; only the
    clients with overlapping sessions take a running maximum of their ends each."""
    order = np.lexsort((starts, owner))
    owner, starts, ends = owner[order], starts[order], ends[order]
    del order
    if not len(starts):
        return owner, starts, ends
    reach = ends.copy()  # the latest end so far within the client, where sessions overlap
    overlapping = np.unique(owner[1:][(owner[1:] == owner[:-1]) & (starts[1:] <= ends[:-1])])
    firsts, lasts = np.searchsorted(owner, overlapping), np.searchsorted(owner, overlapping, side="right")
    for first, last in zip(firsts.tolist(), lasts.tolist()):
        reach[first:last] = np.maximum.accumulate(ends[first:last])
    first = np.concatenate([[0], np.flatnonzero((owner[1:] != owner[:-1]) | (starts[1:] > reach[:-1])) + 1])
    del reach
    owner, starts, ends = owner[first], starts[first], np.maximum.reduceat(ends, first)
    keep = ends > starts
    return owner[keep], starts[keep], ends[keep]


def _online_record(path: Path, ids: list[str], owner: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                   period: np.ndarray | None) -> OnlineRecord:
    """The record of clients `ids` (file order; owner indexes them), their sessions clipped to their period (FedScale
    replays a record at time mod finish_time, so what lies past it is never reached) and merged."""
    clients = _client_order(ids)
    rank = np.empty(len(ids), dtype=np.int64)
    rank[_positions(ids, clients)] = np.arange(len(ids))
    owner = rank[owner]
    if period is not None:
        period = period[np.argsort(rank)]
        starts, ends = np.minimum(starts, period[owner]), np.minimum(ends, period[owner])
    owner, starts, ends = _merged(owner, starts, ends)
    if len(starts) == 0:
        raise RecordError(path, f"no client of the record's {len(ids):,} is ever online: every session has zero "
                                "length (or lies past its client's period)")
    return OnlineRecord(tuple(clients), starts, ends, owner, period, rank)


def _positions(ids: list[str], clients: list[str]) -> np.ndarray:
    where = {client: position for position, client in enumerate(ids)}
    return np.fromiter((where[client] for client in clients), dtype=np.int64, count=len(clients))


def _plain_dict(path: Path, layout: str) -> dict[str, dict]:
    """The record's top-level dict with client ids as text, in the file's order."""
    record = load_plain_pickle(path)
    if type(record) is not dict or not record:
        what = "an empty dict" if type(record) is dict else f"a {type(record).__name__}"
        raise RecordError(path, f"the pickle holds {what}; expected {layout}")
    by_id = {}
    for key, value in record.items():
        client = _client_id(path, key, layout)
        if client in by_id:
            raise RecordError(path, f"client id {client!r} appears twice (as {shown(key)} and another key); "
                                    f"expected {layout}")
        if type(value) is not dict:
            raise RecordError(path, f"client {client}: the value is a {type(value).__name__}, not a dict; "
                                    f"expected {layout}")
        by_id[client] = value
    return by_id


def _number_list(path: Path, client: str, key: str, value) -> np.ndarray:
    if type(value) not in (list, tuple) or not all(_is_number(v) for v in value):
        raise RecordError(path, f"client {client}: {key!r} is not a list of numbers; expected {BEHAVE_LAYOUT}")
    array = np.asarray(value, dtype=np.float64) if value else np.empty(0)
    if not np.isfinite(array).all() or (array < 0).any() or (array > MAX_TIME_S).any():
        raise RecordError(path, f"client {client}: {key!r} holds a negative, non-finite or larger than "
                                f"{MAX_TIME_S:g} s time; expected {BEHAVE_LAYOUT}")
    return array


def _positive_number(path: Path, client: str, key: str, value, layout: str, bounds=(0.0, MAX_TIME_S)) -> float:
    if not _is_number(value) or not math.isfinite(value) or not bounds[0] < value <= bounds[1]:
        raise RecordError(path, f"client {client}: {key!r} is {shown(value)}, not a number in "
                                f"({bounds[0]:g}, {bounds[1]:g}]; expected {layout}")
    return float(value)


def _client_sessions(path: Path, client: str, entry: dict) -> tuple[np.ndarray, np.ndarray, float]:
    for key in ("active", "inactive", "finish_time"):
        if key not in entry:
            raise RecordError(path, f"client {client}: no {key!r} key (it has {_keys(entry)}); "
                                    f"expected {BEHAVE_LAYOUT}")
    starts = _number_list(path, client, "active", entry["active"])
    ends = _number_list(path, client, "inactive", entry["inactive"])
    if len(starts) != len(ends):
        raise RecordError(path, f"client {client}: 'active' has {len(starts)} times but 'inactive' "
                                f"{len(ends)}; expected {BEHAVE_LAYOUT}")
    if (ends < starts).any():
        j = int(np.flatnonzero(ends < starts)[0])
        raise RecordError(path, f"client {client}: session {j} ends (inactive {shown(entry['inactive'][j])}) "
                                f"before it starts (active {shown(entry['active'][j])}); expected {BEHAVE_LAYOUT}")
    period = _positive_number(path, client, "finish_time", entry["finish_time"], BEHAVE_LAYOUT)
    if "duration" in entry and not _is_number(entry["duration"]):
        raise RecordError(path, f"client {client}: 'duration' is {shown(entry['duration'])}, not a number; "
                                f"expected {BEHAVE_LAYOUT}")
    if "model" in entry and type(entry["model"]) is not str:
        raise RecordError(path, f"client {client}: 'model' is {shown(entry['model'])}, not a string; "
                                f"expected {BEHAVE_LAYOUT}")
    return starts, ends, period


def read_fedscale_availability(path: str | os.PathLike) -> OnlineRecord:
    """FedScale's client_behave_trace: client i is online over [active[j], inactive[j]], repeating every
    finish_time seconds."""
    path = Path(path)
    entries = _plain_dict(path, BEHAVE_LAYOUT)
    sessions = [_client_sessions(path, client, entry) for client, entry in entries.items()]
    owner = np.repeat(np.arange(len(sessions), dtype=np.int64), [len(starts) for starts, _, _ in sessions])
    return _online_record(path, list(entries), owner, np.concatenate([s for s, _, _ in sessions] + [np.empty(0)]),
                          np.concatenate([e for _, e, _ in sessions] + [np.empty(0)]),
                          np.array([period for _, _, period in sessions], dtype=np.float64))


def _capacity(path: Path, ids: list[str], computation: np.ndarray, communication: np.ndarray,
              where: str) -> DeviceCapacity:
    """The capacities of clients `ids` (file order), each checked against the plausible ranges."""
    for name, values, (low, high) in (("computation_ms", computation, COMPUTATION_MS_RANGE),
                                      ("communication_kbps", communication, COMMUNICATION_KBPS_RANGE)):
        bad = np.flatnonzero(~((values >= low) & (values <= high)))
        if len(bad):
            raise RecordError(path, f"client {ids[bad[0]]}: {name} is {values[bad[0]]:g}, outside the plausible "
                                    f"[{low:g}, {high:g}]; expected {where}")
    clients = _client_order(ids)
    order = _positions(ids, clients)
    listed = np.empty(len(ids), dtype=np.int64)
    listed[order] = np.arange(len(ids))
    return DeviceCapacity(tuple(clients), computation[order], communication[order], listed)


def read_fedscale_capacity(path: str | os.PathLike) -> DeviceCapacity:
    """FedScale's client_device_capacity: ms per sample and kbit/s per client."""
    path = Path(path)
    record = _plain_dict(path, CAPACITY_LAYOUT)
    values = {key: [] for key in ("computation", "communication")}
    for client, entry in record.items():
        for key, column in values.items():
            if key not in entry:
                raise RecordError(path, f"client {client}: no {key!r} key (it has {_keys(entry)}); "
                                        f"expected {CAPACITY_LAYOUT}")
            value = entry[key]
            if not _is_number(value) or not math.isfinite(value):
                raise RecordError(path, f"client {client}: {key!r} is {shown(value)}, not a finite number; "
                                        f"expected {CAPACITY_LAYOUT}")
            column.append(float(value))
    return _capacity(path, list(record), np.asarray(values["computation"], dtype=np.float64),
                     np.asarray(values["communication"], dtype=np.float64), CAPACITY_LAYOUT)


# Tables


def _table_layout(columns: tuple[str, ...], optional: tuple[str, ...] = ()) -> str:
    extra = f" (and optionally {', '.join(optional)})" if optional else ""
    return f"a CSV or Parquet table with the columns {', '.join(columns)}{extra}"


def _csv_header(path: Path) -> list[str]:
    """The CSV's column names (a UTF-8 byte order mark skipped), its first line read no further than 64 KiB."""
    with open(path, encoding="utf-8-sig", newline="") as file:
        line = file.readline(65536)
    return next(csv.reader(io.StringIO(line)), [])


def _column_names(path: Path, kind: str, columns: tuple[str, ...], layout: str) -> list[str]:
    """The table's column names, none twice and every one of `columns` among them."""
    import pyarrow.parquet

    try:
        names = pyarrow.parquet.read_schema(path).names if kind == "parquet" else _csv_header(path)
    except Exception as error:  # damaged Parquet footer, bad UTF-8
        raise RecordError(path, f"not a readable table ({type(error).__name__}: {_cut(str(error))}); "
                                f"expected {layout}") from error
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise RecordError(path, f"column {_cut(twice[0], 40)} appears more than once; expected {layout}")
    missing = [name for name in columns if name not in names]
    if missing:
        raise RecordError(path, f"no column {', '.join(missing)} (it has {_names(names) or 'none'}); "
                                f"expected {layout}")
    return names


def _checked_column(path: Path, name: str, column, layout: str):
    """A read column checked: client ids integers or text (as dictionary-encoded text), any other column numbers (as
    float64), no cell empty."""
    import pyarrow
    import pyarrow.compute

    kinds = pyarrow.types
    if name == "client":
        text = kinds.is_dictionary(column.type) and kinds.is_string(column.type.value_type) or \
            kinds.is_string(column.type) or kinds.is_large_string(column.type)
        if not (text or kinds.is_integer(column.type)):
            raise RecordError(path, f"column client holds {column.type}; client ids are integers or strings; "
                                    f"expected {layout}")
        if not kinds.is_dictionary(column.type):
            column = pyarrow.compute.dictionary_encode(pyarrow.compute.cast(column, pyarrow.string()))
    elif not (kinds.is_integer(column.type) or kinds.is_floating(column.type)):
        raise RecordError(path, f"column {name} holds {column.type}, not numbers; expected {layout}")
    nulls = column.is_null()
    if pyarrow.compute.any(nulls).as_py():
        row = int(np.flatnonzero(nulls.to_numpy(zero_copy_only=False))[0])
        raise RecordError(path, f"row {row}: {name} is missing (an empty cell, NA, NaN or null); expected {layout}")
    return column if name == "client" else column.to_numpy().astype(np.float64)


def _read_columns(path: Path, columns: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    """The named columns of a CSV or Parquet table (told by content): the client column as pyarrow text, every other
    as float64. A column named twice, a missing one, an empty table, a cell that is empty or no number: RecordError."""
    import pyarrow
    import pyarrow.csv
    import pyarrow.parquet

    layout = _table_layout(columns, optional)
    kind = record_format(path)
    if kind == "pickle":
        raise RecordError(path, f"a pickle where a table was expected; expected {layout}")
    _check_size(path, MAX_TABLE_BYTES, "table")
    names = _column_names(path, kind, columns, layout)
    wanted = [*columns, *(name for name in optional if name in names)]
    try:
        if kind == "parquet":
            table = pyarrow.parquet.read_table(path, columns=wanted)
        else:
            client = pyarrow.dictionary(pyarrow.int32(), pyarrow.string())  # each distinct id stored once
            types = {name: client if name == "client" else pyarrow.float64() for name in wanted}
            # One thread, 16 MiB blocks: the least memory measured on a 200 MB table (and no slower on 2 cores)
            table = pyarrow.csv.read_csv(
                path, read_options=pyarrow.csv.ReadOptions(use_threads=False, block_size=16 * 2**20),
                convert_options=pyarrow.csv.ConvertOptions(include_columns=wanted, column_types=types,
                                                           strings_can_be_null=False))
    except (pyarrow.ArrowInvalid, OSError) as error:  # a short row, a cell that is no number, broken quoting
        raise RecordError(path, f"not a readable table ({_cut(str(error))}); expected {layout}") from error
    if table.num_rows == 0:
        raise RecordError(path, f"the table has no rows; expected {layout}")
    return {name: _checked_column(path, name, table.column(name), layout) for name in wanted}


def _table_clients(path: Path, column, layout: str) -> tuple[list[str], np.ndarray]:
    """(client ids in order of first appearance, int64 [rows] each row's index into them), from the dictionary-encoded
    client column: each distinct id is read once. Arrow's dictionaries list values in order of first appearance (a
    chunk's new values after the earlier chunks'), so the ids' order needs no pass over the rows."""
    column = column.unify_dictionaries()
    raw = column.chunk(0).dictionary.to_pylist()
    ids = [_client_id(path, value, layout) for value in raw]
    clients = list(dict.fromkeys(ids))  # "7" and "07" are one client, first seen where either first is
    position = dict(zip(clients, range(len(clients))))
    of_raw = np.fromiter((position[client] for client in ids), dtype=np.int64, count=len(ids))
    return clients, np.concatenate([of_raw[chunk.indices.to_numpy(zero_copy_only=False)] for chunk in column.chunks])


def _bad_row(path: Path, bad: np.ndarray, message: str) -> None:
    if len(bad):
        raise RecordError(path, f"row {int(bad[0])}: {message(int(bad[0]))}")


def read_interval_table(path: str | os.PathLike) -> OnlineRecord:
    """A table of online sessions, one row each: client, start_s, end_s (0 <= start_s <= end_s), and optionally
    period_s, the same on every row of a client: its sessions repeat with it as FedScale's finish_time; without it a
    table does not repeat."""
    path = Path(path)
    layout = _table_layout(INTERVAL_COLUMNS, (PERIOD_COLUMN,))
    table = _read_columns(path, INTERVAL_COLUMNS, (PERIOD_COLUMN,))
    ids, owner = _table_clients(path, table.pop("client"), layout)
    starts, ends = table.pop("start_s"), table.pop("end_s")
    for name, times in (("start_s", starts), ("end_s", ends)):
        _bad_row(path, np.flatnonzero(~(np.isfinite(times) & (times <= MAX_TIME_S))),
                 lambda row, name=name, times=times: f"{name} is {times[row]:g}, not a finite number of at most "
                                                     f"{MAX_TIME_S:g} s; expected {layout}")
    _bad_row(path, np.flatnonzero((starts < 0) | (ends < starts)),
             lambda row: f"session of client {ids[owner[row]]} from {starts[row]:g} to {ends[row]:g} s is negative "
                         f"or inverted; expected {layout}, 0 <= start_s <= end_s")
    period = None
    if PERIOD_COLUMN in table:
        per_row = table[PERIOD_COLUMN]
        _bad_row(path, np.flatnonzero(~(np.isfinite(per_row) & (per_row > 0) & (per_row <= MAX_TIME_S))),
                 lambda row: f"period_s is {per_row[row]:g}, not a number in (0, {MAX_TIME_S:g}]; expected {layout}")
        period = np.zeros(len(ids))
        period[owner] = per_row
        _bad_row(path, np.flatnonzero(period[owner] != per_row),
                 lambda row: f"client {ids[owner[row]]} has two periods, {per_row[row]:g} and "
                             f"{period[owner[row]]:g}; expected one period_s per client")
    return _online_record(path, ids, owner, starts, ends, period)


def read_capacity_table(path: str | os.PathLike) -> DeviceCapacity:
    """A table of device capacities, one row per client: client, computation_ms, communication_kbps."""
    path = Path(path)
    layout = _table_layout(CAPACITY_COLUMNS) + ", one row per client"
    table = _read_columns(path, CAPACITY_COLUMNS)
    ids, owner = _table_clients(path, table["client"], layout)
    counts = np.bincount(owner, minlength=len(ids))
    if (counts > 1).any():
        client = int(np.flatnonzero(counts > 1)[0])
        rows = np.flatnonzero(owner == client)[:2].tolist()
        raise RecordError(path, f"client {ids[client]} has rows {rows[0]} and {rows[1]}; expected {layout}")
    computation, communication = np.empty(len(ids)), np.empty(len(ids))
    computation[owner], communication[owner] = table["computation_ms"], table["communication_kbps"]
    return _capacity(path, ids, computation, communication, layout)


def read_online_record(path: str | os.PathLike) -> OnlineRecord:
    """The online sessions of `path`: FedScale's client_behave_trace, or an interval table (told by content)."""
    return read_fedscale_availability(path) if record_format(path) == "pickle" else read_interval_table(path)


def read_device_capacity(path: str | os.PathLike) -> DeviceCapacity:
    """The device capacities of `path`: FedScale's client_device_capacity, or a capacity table (told by content)."""
    return read_fedscale_capacity(path) if record_format(path) == "pickle" else read_capacity_table(path)


def write_interval_table(path: str | os.PathLike, record: OnlineRecord) -> None:
    """The record as a Parquet interval table (client, start_s, end_s, and period_s where it repeats), clients in the
    file order they were read in, so that FedScale's mapping (fedscale_clients) is the same on the table."""
    import pyarrow
    import pyarrow.parquet

    from fedavail.io import atomic_path

    rank = np.empty(len(record.clients), dtype=np.int64)
    rank[file_order(record)] = np.arange(len(record.clients))
    order = np.lexsort((record.starts, rank[record.owner]))
    owner = record.owner[order]
    columns = {"client": pyarrow.array([record.clients[i] for i in owner], pyarrow.string()),
               "start_s": record.starts[order], "end_s": record.ends[order]}
    if record.period is not None:
        columns[PERIOD_COLUMN] = record.period[owner]
    with atomic_path(path) as tmp:
        pyarrow.parquet.write_table(pyarrow.table(columns), tmp)


def write_capacity_table(path: str | os.PathLike, capacity: DeviceCapacity) -> None:
    """The capacities as a Parquet table (client, computation_ms, communication_kbps) in the order they were read."""
    import pyarrow
    import pyarrow.parquet

    from fedavail.io import atomic_path

    order = file_order(capacity)
    columns = {"client": pyarrow.array([capacity.clients[i] for i in order], pyarrow.string()),
               "computation_ms": capacity.computation_ms[order],
               "communication_kbps": capacity.communication_kbps[order]}
    with atomic_path(path) as tmp:
        pyarrow.parquet.write_table(pyarrow.table(columns), tmp)


# Mapping a record onto a partition's clients


def draw_clients(record_clients: int, num_clients: int, rng: np.random.Generator, repeat: bool = False) -> np.ndarray:
    """int64 [num_clients]: the record client that plays each partition client, drawn uniformly without replacement;
    with `repeat`, a record with too few clients is dealt out in whole shuffled rounds, so each record client plays
    ⌊m/c⌋ or ⌈m/c⌉ partition clients."""
    _check_counts(record_clients, num_clients, repeat)
    rounds = -(-num_clients // record_clients)
    drawn = np.concatenate([rng.permutation(record_clients) for _ in range(rounds)])
    return drawn[:num_clients].astype(np.int64)


def fedscale_clients(record: OnlineRecord | DeviceCapacity, num_clients: int, repeat: bool = False) -> np.ndarray:
    """int64 [num_clients]: FedScale's fixed mapping (its ClientManager.register_client): its client k = i + 1 (ids
    count from 1) plays the record's client keys[k mod c], keys in the file's order."""
    _check_counts(len(record.clients), num_clients, repeat)
    return file_order(record)[(np.arange(num_clients) + 1) % len(record.clients)]


def _check_counts(record_clients: int, num_clients: int, repeat: bool) -> None:
    if record_clients < 1 or num_clients < 1:
        raise ValueError(f"mapping a record needs record_clients >= 1 and num_clients >= 1, got {record_clients} and "
                         f"{num_clients}")
    if record_clients < num_clients and not repeat:
        raise ValueError(f"the record has {record_clients} clients but the partition {num_clients}; set "
                         "repeat_clients: true to let record clients play several partition clients, or use fewer "
                         "clients")


def client_sessions(record: OnlineRecord, chosen: np.ndarray) -> OnlineRecord:
    """The sessions of record clients `chosen` [m] as a record of m clients "0", …, "m-1" (client j plays chosen[j]),
    in that order: what a trace stores for the replay."""
    first, last = np.searchsorted(record.owner, chosen), np.searchsorted(record.owner, chosen, side="right")
    take = np.concatenate([np.arange(a, b) for a, b in zip(first, last)] + [np.empty(0, dtype=np.int64)])
    owner = np.repeat(np.arange(len(chosen), dtype=np.int64), last - first)
    period = None if record.period is None else record.period[chosen]
    return OnlineRecord(tuple(str(j) for j in range(len(chosen))), record.starts[take], record.ends[take], owner,
                        period)


# Reading a record over time


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


def _sessions_up_to(record: OnlineRecord, clients: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each (clients[j], x[j]): the index one past the client's last session starting at or before x[j], and the
    client's first session index (a binary search within each client's block, vectorised over j)."""
    first = np.searchsorted(record.owner, clients, side="left")
    low, high = first.copy(), np.searchsorted(record.owner, clients, side="right")
    while (open_ := low < high).any():
        middle = (low + high) // 2
        before = open_ & (record.starts[np.minimum(middle, len(record.starts) - 1)] <= x)
        low, high = np.where(before, middle + 1, low), np.where(open_ & ~before, middle, high)
    return low, first


def _record_time(record: OnlineRecord, clients: np.ndarray, instants: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the instants within each client's period, the start of that period): FedScale reads at time mod finish_time."""
    if record.period is None:
        return instants, np.zeros_like(instants)
    period = record.period[clients]
    cycles, rest = np.divmod(instants, period)
    return rest, cycles * period


def online_at(record: OnlineRecord, clients: np.ndarray, instants: np.ndarray) -> np.ndarray:
    """bool [n]: record client clients[j] is online at instants[j] >= 0, sessions closed at both ends (FedScale's
    ClientMetadata.is_active: active <= t mod finish_time <= inactive)."""
    clients, instants = np.asarray(clients, dtype=np.int64), np.asarray(instants, dtype=np.float64)
    x, _ = _record_time(record, clients, instants)
    after, first = _sessions_up_to(record, clients, x)
    last = np.maximum(after - 1, 0)
    return (after > first) & (record.ends[last] >= x) if len(record.starts) else np.zeros(len(x), dtype=bool)


def next_start(record: OnlineRecord, clients: np.ndarray, instant: float) -> float:
    """The earliest instant after `instant` at which one of record clients `clients` starts a session (inf: none
    ever does again)."""
    clients = np.asarray(clients, dtype=np.int64)
    if not len(clients) or not len(record.starts):
        return math.inf
    x, cycle_start = _record_time(record, clients, np.full(len(clients), float(instant)))
    after, first = _sessions_up_to(record, clients, x)
    last = np.searchsorted(record.owner, clients, side="right")
    starts = np.where(after < last, cycle_start + record.starts[np.minimum(after, len(record.starts) - 1)], np.inf)
    if record.period is not None:  # else the first session of the next cycle
        wrapped = cycle_start + record.period[clients] + record.starts[np.minimum(first, len(record.starts) - 1)]
        starts = np.where((after >= last) & (first < last), wrapped, starts)
    return float(starts.min())


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
