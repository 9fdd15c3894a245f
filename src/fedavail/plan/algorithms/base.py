"""The options every algorithm has; each algorithm's own subclass them in its module here, @registered, and its
algorithm class (fedavail.algorithms.<name>) inherits those, so a config is checked without building anything."""

from dataclasses import dataclass, fields
from typing import ClassVar

from fedavail.options import check_fields, must, option

REGISTERED: dict[str, type] = {}  # algorithm name -> its options class, added when its options module is imported


def registered(cls):
    """`cls`, a frozen keyword-only dataclass, registered as the options of the algorithm its module is named after."""
    cls = dataclass(frozen=True, kw_only=True)(cls)
    cls.NAME = cls.__module__.rpartition(".")[2]
    REGISTERED[cls.NAME] = cls
    return cls


@dataclass(frozen=True, kw_only=True)
class AlgorithmOptions:
    """Each option's allowed values are declared on its field (`option(..., choices=..., check=must(...))`, the
    convention of every settings class: fedavail.options); an error names the algorithm and the option."""

    NAME: ClassVar[str]  # the registered name (`registered` sets it)
    # The server keeps every client's latest update (O(md) memory): FedSWE Table 2 ranks such methods apart.
    MEMORY_AIDED: ClassVar[bool] = False

    global_lr: float = option(1.0, "server learning rate η_g: x ← x + η_g·U", check=must("> 0", lambda v: v > 0))

    def __post_init__(self):
        check_fields(self, f"{self.NAME} option")

    @classmethod
    def hyperparameters(cls) -> list[str]:
        return [f.name for f in fields(cls) if f.init]

    def needs_prob(self) -> bool:
        """Whether the algorithm reads p_i^t, so its trace must store it."""
        return False

    def label(self) -> str:
        """How tables and figures name the algorithm with these options; an algorithm without its own label is
        shown by its registered name (the plan tells two entries of one label apart: fedavail.plan.labels)."""
        return self.NAME

    def identity(self) -> str:
        """The method these options make, as the papers' published tables name it (report/paper_values.csv)."""
        return self.NAME

    def aided(self) -> bool:
        """Aided by memory of the clients' updates or by known participation statistics (FedSWE Table 2's group 2,
        ranked apart from the others)."""
        return self.MEMORY_AIDED or self.needs_prob()

    def composed_algorithms(self) -> tuple[str, ...]:
        """The other algorithms a run of this one executes (their code is part of the run's training sources)."""
        return ()
