"""Stop requests (SIGTERM/SIGINT, e.g. SLURM preemption or a job's time limit). The handler only records the request;
training checks it between rounds, clients and local steps (`raise_if_requested`), so a stop never waits for a long
round: the unfinished round is discarded and the run checkpoints at its start."""

import signal

_requested: list[int] = []


class StopRequested(Exception):
    def __init__(self, signum: int):
        super().__init__(f"stop requested (signal {signum})")
        self.signum = signum


def install() -> None:
    """Route SIGTERM and SIGINT to `request` and forget any earlier request (one run per process at a time)."""
    _requested.clear()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: request(signum))


def request(signum: int) -> None:
    _requested.append(signum)


def requested() -> int | None:
    return _requested[0] if _requested else None


def raise_if_requested() -> None:
    if _requested:
        raise StopRequested(_requested[0])
