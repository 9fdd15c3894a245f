"""The virtual clock (docs/recorded-availability.md, "The virtual clock"), in one place: a trace's `clock` settings
(ClockOptions), the device capacities a trace job draws and stores (device_capacity), and `Clock`, one run's clock,
built once by its training process (fedavail.train.TrainingRun) and held by it. Each round the Clock prices every
client's local work in device seconds (the samples it trains this round, FedScale's cost model), leaves out the clients
that would miss the deadline (counting them as late), asks the FedScale replay (fedavail.availability.replay) who
takes part where this run's clock stands, and advances by the round's duration."""

from dataclasses import dataclass

import numpy as np

from fedavail.availability import device_records
from fedavail.options import check_fields, check_keys, check_positive, is_number, key_table, must, option

WHAT = "trace spec key 'clock'"
MAX_SIGMA = 3.0  # a spread of e^3 ≈ 20 times per σ: wider draws leave the plausible capacities (device_records.py)
# FedScale's ClientMetadata.get_completion_time: a backward pass costs about twice the forward one
PASSES_PER_SAMPLE = 3.0
BITS_PER_PARAMETER = 32  # float32


def _check_in(bounds: tuple[float, float]):
    return must(f"a number in [{bounds[0]:g}, {bounds[1]:g}]", lambda v: is_number(v) and bounds[0] <= v <= bounds[1])


@dataclass(frozen=True, kw_only=True)
class ClockOptions:
    """A trace's virtual clock: each client's device capacity, from a record or a stated log-normal law, and an optional
    round deadline. A client's local work in a round takes 3 × samples × computation_ms / 1000 (a backward pass costs
    about twice the forward one, as in FedScale, arXiv 2105.11367) + 2 × model kbit / communication_kbps (the model
    down and the update up) seconds, samples being those it trains that round; a round lasts as long as its slowest
    participant needs."""

    capacity: str | None = option(None, "a device-capacity record: FedScale's client_device_capacity pickle, or a "
                                  "CSV or Parquet table of client, computation_ms, communication_kbps (told by "
                                  "content); its clients are drawn for the partition's, with repetition (replay "
                                  "fedscale: FedScale's fixed mapping); null: the law below")
    computation_ms: float = option(100.0, "no record: the median milliseconds per training sample (forward pass)",
                                   check=_check_in(device_records.COMPUTATION_MS_RANGE))
    communication_kbps: float = option(5000.0, "no record: the median bandwidth, kbit/s",
                                       check=_check_in(device_records.COMMUNICATION_KBPS_RANGE))
    sigma: float = option(0.0, f"no record: σ of the log-normal spread of both across clients (0: all the same; at "
                          f"most {MAX_SIGMA:g})",
                          check=_check_in((0.0, MAX_SIGMA)))
    deadline_s: float | None = option(None, "a round's deadline, seconds: a client that would need longer is left out "
                                      "of the round (counted in the metrics' `late`); null: none",
                                      check=check_positive)

    def __post_init__(self):
        check_fields(self, WHAT)


def resolve_clock(clock: dict) -> ClockOptions:
    if not isinstance(clock, dict):
        raise ValueError(f"{WHAT} must be a mapping of clock settings or null, got {clock!r}")
    check_keys(clock, key_table(ClockOptions), WHAT, "the clock")
    return ClockOptions(**clock)


def device_capacity(options: ClockOptions, num_clients: int, rng: np.random.Generator,
                    fedscale_mapping: bool = False) -> tuple[np.ndarray, dict]:
    """float64 [2, m] (ms per sample, kbit/s) and the params to record: a record's clients drawn for the m clients with
    repetition (device kinds recur), or with `fedscale_mapping` FedScale's fixed mapping
    (device_records.fedscale_clients), or both drawn log-normal around the stated medians."""
    if options.capacity is not None:
        record = device_records.read_device_capacity(options.capacity)
        chosen = device_records.fedscale_clients(record, num_clients, repeat=True) if fedscale_mapping else \
            device_records.draw_clients(len(record.clients), num_clients, rng, repeat=True)
        capacity = np.stack([record.computation_ms[chosen], record.communication_kbps[chosen]])
        return capacity, {"capacity_clients": [record.clients[c] for c in chosen]}
    spread = np.exp(options.sigma * rng.standard_normal((2, num_clients)))
    return np.array([[options.computation_ms], [options.communication_kbps]]) * spread, {}


def completion_seconds(capacity: np.ndarray, samples: np.ndarray, parameters: int) -> np.ndarray:
    """float64 [m]: the device seconds each client needs for a round of `samples` [m] training samples with a model of
    `parameters` float32 numbers: 3 × samples × ms per sample / 1000 (forward and about twice as long a backward pass,
    FedScale's cost model, arXiv 2105.11367) + the model down and its update up at the client's kbit/s."""
    computation_ms, communication_kbps = capacity
    model_kbit = parameters * BITS_PER_PARAMETER / 1000.0
    return PASSES_PER_SAMPLE * samples * computation_ms / 1000.0 + 2.0 * model_kbit / communication_kbps


def samples_this_round(local, sizes: np.ndarray, position: np.ndarray | None) -> np.ndarray:
    """float64 [m]: the samples each client trains if it takes part this round under `local` (training.local,
    fedavail.plan.local.LocalOptions, which this settings module does not import), as ClientTrainer.plan takes them:
    `steps` batches of exactly B; or, with `epochs` E, the rest of its current epoch from batch `position` on and E − 1
    more, at most `max_steps` batches, the last batch of an epoch holding only the epoch's remainder."""
    batch = local.batch_size
    if local.steps is not None:
        return np.full(len(sizes), float(local.steps * batch))
    size = np.asarray(sizes, dtype=np.int64)
    batches = -(-size // batch)  # per epoch
    position = np.zeros(len(size), dtype=np.int64) if position is None else np.asarray(position, dtype=np.int64)
    steps = batches - position + (local.epochs - 1) * batches
    if local.max_steps is not None:
        steps = np.minimum(steps, local.max_steps)
    epoch_ends = (position + steps) // np.maximum(batches, 1)  # each epoch's last batch is short by B·c − n
    return np.where(batches > 0, steps * batch - epoch_ends * (batches * batch - size), 0).astype(np.float64)


@dataclass
class RoundTime:
    """What the clock says of one round before its participants are chosen."""

    seconds: np.ndarray  # float64 [m]: each client's device seconds for this round's local work
    available: np.ndarray  # bool [m]: who may take part (available, or under the replay admitted, and on time)
    late: int  # clients available (replay: online) but past the deadline
    online: int | None = None  # replay: clients online at the round's start, of those the small-client filter keeps


class Clock:
    """One run's virtual clock: its clients' capacities, the cost of their work under `local` (training.local), the
    deadline, and the device seconds since round 0's start (`elapsed_s`). With a replay, who takes part in a round is
    read where this clock stands."""

    def __init__(self, options: ClockOptions, capacity: np.ndarray, sizes: np.ndarray, local, parameters: int,
                 replay=None):
        self.options, self.capacity, self.sizes, self.local = options, capacity, np.asarray(sizes), local
        self.parameters, self.replay = parameters, replay
        self.elapsed_s = 0.0
        self.record_ended = False  # the replay found no session ahead: later rounds have nobody to wait for

    def seconds(self, position: np.ndarray | None) -> np.ndarray:
        """float64 [m]: each client's device seconds for this round's work, its epoch cursor at `position`."""
        return completion_seconds(self.capacity, samples_this_round(self.local, self.sizes, position), self.parameters)

    def on_time(self, seconds: np.ndarray) -> np.ndarray:
        deadline = self.options.deadline_s
        return np.ones(len(seconds), dtype=bool) if deadline is None else seconds <= deadline

    def check_someone_can_finish(self, where: str) -> None:
        """ValueError naming `deadline_s` when no client could ever finish a round by the deadline, even its smallest
        round (the last batch of an epoch): every round would be empty."""
        if self.options.deadline_s is None:
            return
        last_batch = -(-np.asarray(self.sizes, dtype=np.int64) // self.local.batch_size) - 1
        fastest = self.seconds(np.maximum(last_batch, 0)).min()
        if fastest > self.options.deadline_s:
            raise ValueError(f"{where}: {WHAT} 'deadline_s' is {self.options.deadline_s:g} s, but no client can ever "
                             f"finish a round in time (the fastest needs at least {fastest:.3g} s for this "
                             "experiment's local work): every round would be empty; raise deadline_s or set it to "
                             "null")

    def open_round(self, t: int, available: np.ndarray, position: np.ndarray | None) -> RoundTime:
        """Round t's prices and who may take part: the trace's `available` [m] (window rule) or the replay's choice at
        this clock's time, less the clients past the deadline."""
        seconds = self.seconds(position)
        on_time = self.on_time(seconds)
        if self.replay is not None:
            admitted, late, online = self.replay.admit(t, self.elapsed_s, seconds, on_time)
            return RoundTime(seconds, admitted, late, online)
        return RoundTime(seconds, available & on_time, int((available & ~on_time).sum()))

    def close_round(self, round_time: RoundTime, participants: np.ndarray) -> float:
        """Advance by the round's duration, its slowest participant's seconds, and return the elapsed device seconds.
        A replayed round without participants lasts until the next session of a client that could take part starts
        (FedScale has no such round: it would stop)."""
        if len(participants):
            self.elapsed_s += float(round_time.seconds[participants].max())
        elif self.replay is not None and not self.record_ended:
            resumes = self.replay.next_session(self.elapsed_s, self.on_time(round_time.seconds))
            self.record_ended = resumes == np.inf
            self.elapsed_s = self.elapsed_s if self.record_ended else resumes
        return self.elapsed_s
