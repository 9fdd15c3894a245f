"""FedScale 1.0's replay of a device record (FedScale, arXiv 2105.11367; its ClientManager and the aggregator's
round_completion_handler and tictak_client_tasks), the `fedscale` replay of the recorded trace model. Unlike the window
rule, who takes part depends on the run's own virtual clock, so it is computed here, in the training loop, once per
round of every run (fedavail.availability.clock.Clock.open_round), from what the trace file stores: the sessions of the
record client each partition client plays (FedScale's fixed mapping) and the capacities. Every algorithm of a seed reads
the same trace and draws from the same keyed streams: runs whose clocks stand at the same time see the same clients.

In round t, with the clock at c seconds (the record read at start_s + c):
1. the clients FedScale's small-client filter keeps (at least `min_client_samples` training samples) that are online at
   that instant, less those past the clock's deadline (late);
2. with `participants` K: ⌊overcommitment·K⌋ of them drawn uniformly (all when there are no more), stream
   (seed, "replay", t);
3. those still online when their work would end (instant + their seconds);
4. with K: the K fastest of them (ties to the lower client index).
The algorithm chooses its participants among these; the round lasts as long as its slowest participant needs, and the
clock advances by that."""

import numpy as np

from fedavail.availability.device_records import OnlineRecord, next_start, online_at
from fedavail.rng import numpy_generator

WHAT = "trace spec key"


class FedScaleReplay:
    """The replay of one run: its clients' sessions (client i plays sessions.clients[i]), where the record starts, who
    passes the small-client filter, and the over-commitment settings."""

    def __init__(self, sessions: OnlineRecord, start_s: float, eligible: np.ndarray, participants: int | None,
                 overcommitment: float, seed: int):
        self.sessions, self.start_s, self.eligible = sessions, start_s, eligible
        self.participants, self.overcommitment, self.seed = participants, overcommitment, seed
        self.clients = np.arange(len(eligible), dtype=np.int64)

    @classmethod
    def of_trace(cls, params: dict, sessions: OnlineRecord, sizes: np.ndarray, where: str) -> "FedScaleReplay":
        """The replay a trace file describes, for a partition of `sizes` samples per client; ValueError naming
        `min_client_samples` when the filter keeps nobody."""
        eligible = np.asarray(sizes) >= params["min_client_samples"]
        if not eligible.any():
            raise ValueError(f"{where}: {WHAT} 'min_client_samples' is {params['min_client_samples']}, but the "
                             f"partition's largest client has {int(np.max(sizes))} samples: no client could take part; "
                             "lower it")
        return cls(sessions, float(params["start_s"]), eligible, params["participants"], params["overcommitment"],
                   int(params["seed"]))

    def online(self, elapsed_s: float) -> np.ndarray:
        """bool [m]: who the record has online at the instant the clock reaches `elapsed_s`."""
        return online_at(self.sessions, self.clients, np.full(len(self.clients), self.start_s + elapsed_s))

    def admit(self, t: int, elapsed_s: float, seconds: np.ndarray, on_time: np.ndarray) -> tuple[np.ndarray, int, int]:
        """(bool [m] who may take part in round t, how many online were late, how many the filter keeps online)."""
        online = self.online(elapsed_s) & self.eligible
        candidates = np.flatnonzero(online & on_time)
        if self.participants is not None:
            sampled = int(self.participants * self.overcommitment)
            if len(candidates) > sampled:
                rng = numpy_generator(self.seed, "replay", t)
                candidates = np.sort(rng.permutation(candidates)[:sampled])
        ends = self.start_s + elapsed_s + seconds[candidates]
        candidates = candidates[online_at(self.sessions, candidates, ends)]  # still online when its work ends
        if self.participants is not None:
            candidates = candidates[np.argsort(seconds[candidates], kind="stable")[:self.participants]]
        admitted = np.zeros(len(self.clients), dtype=bool)
        admitted[candidates] = True
        return admitted, int((online & ~on_time).sum()), int(online.sum())

    def next_session(self, elapsed_s: float, on_time: np.ndarray) -> float:
        """The clock's time when the next session of a client that could take part starts (inf: never again)."""
        return next_start(self.sessions, np.flatnonzero(self.eligible & on_time), self.start_s + elapsed_s) \
            - self.start_s
