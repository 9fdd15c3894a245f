"""Algorithm registry: a config entry names an algorithm and its hyperparameters."""

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
    return cls(**hyperparameters)
