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
from fedavail.plan.algorithms import check_hyperparameters

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
    """Algorithm `name` with these hyperparameters, checked against its options (fedavail.plan.algorithms)."""
    check_hyperparameters(name, hyperparameters)
    return ALGORITHMS[name](**hyperparameters)
