"""Partition schemes and their settings, torch-free: one frozen dataclass per scheme, each default written here only
(what each scheme does: fedavail.data.partition). A config's partition entry is `dataset` plus `scheme` plus the
scheme's settings."""

from dataclasses import asdict, dataclass, replace
from typing import ClassVar

from fedavail.plan.options import Registry, check_choices, check_int, is_number, option, resolve_variant

WHAT = "partition spec key"
ALLOCATIONS = ("equal", "class_proportional")
# Every scheme by its `scheme` name; how each splits the samples is registered against the same name in
# fedavail.data.partition (SPLITS).
PARTITION_SCHEMES = Registry(f"{WHAT} 'scheme'")

_ALLOCATION = ("equal: client sizes N/m, per-class counts rounded from ν_i·n_i; class_proportional: each class split "
               "among clients in proportion to ν_{i,c} (the FedAWE/FedAU code; unequal sizes)")


@dataclass(frozen=True, kw_only=True)
class Scheme:
    DRAWS_NU: ClassVar[bool] = False  # whether it draws a class mix ν_i per client (the fedswe trace model reads it)

    def for_classes(self, num_classes: int) -> "Scheme":
        """The settings whose default depends on the dataset's number of classes, filled in."""
        return self


@dataclass(frozen=True, kw_only=True)
class DirichletScheme(Scheme):
    MIN_CLIENTS: ClassVar[int] = 1

    num_clients: int = option(doc="number of clients m")
    alpha: float = option(doc="Dirichlet concentration α (smaller: more heterogeneous clients)")

    def __post_init__(self):
        check_int(self.num_clients, "num_clients", self.MIN_CLIENTS, WHAT)
        if not is_number(self.alpha) or self.alpha <= 0:
            raise ValueError(f"{WHAT} 'alpha' must be a positive number, got {self.alpha!r}")
        check_choices(self, WHAT)


@PARTITION_SCHEMES.add("client_dirichlet")
@dataclass(frozen=True, kw_only=True)
class ClientDirichlet(DirichletScheme):
    """ν_i ~ Dir(α·1_C) per client (FedSWE, Hsu et al. 2019, arXiv 1909.06335)."""

    DRAWS_NU = True

    allocation: str = option("equal", _ALLOCATION, choices=ALLOCATIONS)


@PARTITION_SCHEMES.add("balanced_dirichlet")
@dataclass(frozen=True, kw_only=True)
class BalancedDirichlet(DirichletScheme):
    """Sizes N/m, every sample's class drawn from ν_i ~ Dir(α·1_C) (FAST, via FedLab)."""

    DRAWS_NU = True


@PARTITION_SCHEMES.add("hetero_dirichlet")
@dataclass(frozen=True, kw_only=True)
class HeteroDirichlet(DirichletScheme):
    """Per class, shares ~ Dir(α·1_m) over the clients, retried until every client holds min_size samples (FedLab's
    hetero_dir_partition, FAST's Fashion-MNIST code)."""

    min_size: int | None = option(None, "samples every client holds at least; null: the number of classes")
    max_retries: int = option(1_000_000, "attempts before giving up with an error (FedLab retries forever; at α = 0.05 "
                                         "with 100 clients about 1 in 20,000 passes)")

    def __post_init__(self):
        super().__post_init__()
        if self.min_size is not None:
            check_int(self.min_size, "min_size", 0, WHAT)
        check_int(self.max_retries, "max_retries", 1, WHAT)

    def for_classes(self, num_classes: int) -> "HeteroDirichlet":
        return self if self.min_size is not None else replace(self, min_size=num_classes)  # FedLab's default


@PARTITION_SCHEMES.add("two_group")
@dataclass(frozen=True, kw_only=True)
class TwoGroup(DirichletScheme):
    """Clients [0, m/2) hold only classes [0, C/2), the others the rest; client_dirichlet inside each group (FedSWE
    §7.1)."""

    DRAWS_NU = True
    MIN_CLIENTS = 2

    allocation: str = option("equal", _ALLOCATION, choices=ALLOCATIONS)


@PARTITION_SCHEMES.add("natural")
@dataclass(frozen=True, kw_only=True)
class Natural(Scheme):
    """One client per natural group (a Shakespeare role)."""

    num_clients: int | None = option(None, "keep only this many groups, those with the most samples; null: all")

    def __post_init__(self):
        if self.num_clients is not None:
            check_int(self.num_clients, "num_clients", 1, WHAT)


SCHEMES_DRAWING_NU = tuple(name for name, scheme in PARTITION_SCHEMES.items() if scheme.DRAWS_NU)


def resolve_partition(spec: dict) -> Scheme:
    """A partition spec (`scheme` and its settings, no `dataset`) checked, as its scheme's dataclass; raise
    ValueError naming the offending key."""
    return resolve_variant(spec, PARTITION_SCHEMES, "scheme", WHAT, "partition")


def full_partition_spec(spec: dict) -> dict:
    """The spec with every default filled in, `scheme` first."""
    return {"scheme": spec["scheme"], **asdict(resolve_partition(spec))}
