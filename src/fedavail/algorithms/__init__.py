"""The algorithms' behaviour: algorithm `name` is the class ALGORITHM of fedavail.algorithms.<name>, imported only
when a run uses it (the registry is fedavail.plan.algorithms, which also holds each algorithm's options)."""

import importlib

from fedavail.algorithms.base import Algorithm
from fedavail.plan.algorithms import check_hyperparameters, options_class


def algorithm_class(name: str) -> type[Algorithm]:
    options_class(name)  # an unknown name: the error lists the known ones
    return importlib.import_module(f"{__name__}.{name}").ALGORITHM


def build_algorithm(name: str, hyperparameters: dict) -> Algorithm:
    """Algorithm `name` with these hyperparameters, checked against its options (fedavail.plan.algorithms)."""
    check_hyperparameters(name, hyperparameters)
    return algorithm_class(name)(**hyperparameters)
