"""The algorithm registry, torch-free. Algorithm `name` is two modules of that name: its options here (a class declared
@registered, whose docstring cites the paper) and its behaviour in fedavail.algorithms.<name> (exported as
ALGORITHM). Adding a module pair registers the algorithm, and a run imports only the modules of the algorithms it
executes."""

import functools
import importlib
import pkgutil
import typing

from fedavail.options import check_keys, has_type, key_table, setting_error, type_name
from fedavail.plan.algorithms.base import REGISTERED, AlgorithmOptions


@functools.cache
def known_algorithms() -> tuple[str, ...]:
    return tuple(sorted(module.name for module in pkgutil.iter_modules(__path__) if module.name != "base"))


def algorithm_options() -> dict[str, type[AlgorithmOptions]]:
    """Every registered algorithm's options class by name (imports every options module: for checks and docs)."""
    return {name: options_class(name) for name in known_algorithms()}


def options_class(name: str) -> type[AlgorithmOptions]:
    """Algorithm `name`'s options class; ValueError naming the known algorithms when there is none."""
    if name not in known_algorithms():
        raise ValueError(f"unknown algorithm {name!r}; known: {list(known_algorithms())}")
    importlib.import_module(f"{__name__}.{name}")
    return REGISTERED[name]


def check_hyperparameters(name: str, hyperparameters: dict) -> type[AlgorithmOptions]:
    """Raise ValueError for an unknown algorithm, an option it does not take or a value of the wrong type; return
    its options class."""
    cls = options_class(name)
    keys = key_table(cls)
    check_keys(hyperparameters, {key: keys[key] for key in cls.hyperparameters()}, f"{name} option",
               f"algorithm {name!r}")
    hints = typing.get_type_hints(cls)
    for key, value in hyperparameters.items():
        if not has_type(value, hints[key]):
            raise setting_error(f"{name} option", key, f"must be {type_name(hints[key])}, got {value!r}")
    return cls


def resolve_algorithm(name: str, hyperparameters: dict) -> AlgorithmOptions:
    """Algorithm `name`'s options from a config entry's hyperparameters, checked, every default filled in."""
    return check_hyperparameters(name, hyperparameters)(**hyperparameters)
