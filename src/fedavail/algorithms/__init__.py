"""Algorithm registry: a config entry names an algorithm and its hyperparameters."""

from fedavail.algorithms.base import Algorithm
from fedavail.algorithms.fedavg import FedAvg

ALGORITHMS: dict[str, type[Algorithm]] = {
    "fedavg": FedAvg,
}


def build_algorithm(name: str, hyperparameters: dict) -> Algorithm:
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}")
    cls = ALGORITHMS[name]
    unknown = sorted(set(hyperparameters) - set(cls.hyperparameters()))
    if unknown:
        raise ValueError(f"algorithm {name!r} has no hyperparameter(s) {unknown}; it takes {cls.hyperparameters()}")
    return cls(**hyperparameters)
