"""Algorithm registry: a config entry names an algorithm and its hyperparameters."""

import math
import types
import typing

from fedavail.algorithms.base import Algorithm
from fedavail.algorithms.f3ast import F3AST
from fedavail.algorithms.fast import Fast
from fedavail.algorithms.fedau import FedAU
from fedavail.algorithms.fedavg import FedAvg
from fedavail.algorithms.fedprox import FedProx
from fedavail.algorithms.fedswe import FedSWE
from fedavail.algorithms.fedvarp import FedVARP
from fedavail.algorithms.gfedavg import GFedAvg
from fedavail.algorithms.mifa import MIFA
from fedavail.algorithms.scaffold import Scaffold

ALGORITHMS: dict[str, type[Algorithm]] = {
    "fedavg": FedAvg,
    "fedprox": FedProx,
    "scaffold": Scaffold,
    "fast": Fast,
    "fedswe": FedSWE,
    "mifa": MIFA,
    "fedvarp": FedVARP,
    "fedau": FedAU,
    "gfedavg": GFedAvg,
    "f3ast": F3AST,
}


def build_algorithm(name: str, hyperparameters: dict) -> Algorithm:
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}")
    cls = ALGORITHMS[name]
    unknown = sorted(set(hyperparameters) - set(cls.hyperparameters()))
    if unknown:
        raise ValueError(f"algorithm {name!r} has no hyperparameter(s) {unknown}; it takes {cls.hyperparameters()}")
    hints = typing.get_type_hints(cls)
    for key, value in hyperparameters.items():
        if not _has_type(value, hints[key]):
            raise ValueError(f"algorithm {name!r} hyperparameter {key!r} must be {_type_name(hints[key])}, "
                             f"got {value!r}")
    return cls(**hyperparameters)


def _has_type(value, hint) -> bool:
    """`value` fits the dataclass annotation: an int is a float, a float is never an int, bool is neither."""
    allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None or isinstance(value, bool):
        return type(value) in allowed
    if isinstance(value, float):
        return float in allowed and math.isfinite(value)
    if isinstance(value, int):
        return int in allowed or float in allowed
    return any(isinstance(value, t) for t in allowed if isinstance(t, type))


def _type_name(hint) -> str:
    allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    return " or ".join("null" if t is type(None) else "a finite number" if t is float else
                       "an integer" if t is int else t.__name__ for t in allowed)
