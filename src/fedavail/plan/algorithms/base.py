"""The options every algorithm has; each algorithm's own subclass them in its module here, @registered, and its
algorithm class (fedavail.algorithms.<name>) inherits those, so a config is checked without building anything."""

from dataclasses import dataclass, fields
from typing import ClassVar

from fedavail.options import check_fields, option

REGISTERED: dict[str, type] = {}  # algorithm name -> its options class, added when its options module is imported


def registered(cls):
    """`cls`, a frozen keyword-only dataclass, registered as the options of the algorithm its module is named after."""
    cls = dataclass(frozen=True, kw_only=True)(cls)
    REGISTERED[cls.__module__.rpartition(".")[2]] = cls
    return cls


@dataclass(frozen=True, kw_only=True)
class AlgorithmOptions:
    # key -> (what its value must be, the test of a value), checked after the choices and global_lr
    BOUNDS: ClassVar[dict] = {}

    global_lr: float = option(1.0, "server learning rate η_g: x ← x + η_g·U")

    def __post_init__(self):
        name = type(self).__name__.removesuffix("Options").lower()
        check_fields(self, f"{name} option")
        for key, (bound, test) in {"global_lr": ("> 0", lambda v: v > 0), **self.BOUNDS}.items():
            if not test(getattr(self, key)):
                raise ValueError(f"{name} {key} must be {bound}, got {getattr(self, key)!r}")

    @classmethod
    def hyperparameters(cls) -> list[str]:
        return [f.name for f in fields(cls) if f.init]

    def needs_prob(self) -> bool:
        """Whether the algorithm reads p_i^t, so its trace must record it."""
        return False

    def composed_algorithms(self) -> tuple[str, ...]:
        """The other algorithms a run of this one executes (their code is part of the run's training sources)."""
        return ()
