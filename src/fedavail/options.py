"""Declaring settings once: each setting is a field of a frozen dataclass with its type, default, meaning and allowed
values, checked one way everywhere. A setting's allowed values are declared on its field (`option(choices=...,
check=...)`); the class's __post_init__ calls check_fields, then checks what involves several settings; the keys a spec
may give are checked by check_keys. Errors name the setting in one of two forms (setting_error): a spec read on its
own (a trace spec, an algorithm's options) by its family and key, `trace spec key 'p' must be ...`; a block of the
config by its key alone, `rounds: must be ...`, which the config check prefixes with the block's key path."""

import math
import numbers
import types
import typing
from dataclasses import MISSING, field, fields

REQUIRED = "required"  # the default of a key that has none (check_keys)


def option(default=MISSING, doc: str = "", *, choices: tuple = (), check=None):
    """A setting: its default (none: required), what it means (docs/configuration.md), its allowed values, and
    `check(value)`, raising ValueError that says what the value must be (check_fields names the setting; a null
    default may stay null)."""
    metadata = {"doc": doc, "choices": tuple(choices), "check": check}
    if isinstance(default, dict | list):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def default_of(f):
    """A field's default, `MISSING` when it has none."""
    return f.default_factory() if f.default_factory is not MISSING else f.default


def setting_error(what: str | None, key: str, problem: str) -> ValueError:
    """The error of setting `key`: `<what> '<key>' <problem>` in a spec of family `what` (e.g. "trace spec key"),
    `<key>: <problem>` in a config block (what None), whose key path the caller puts in front."""
    return ValueError(f"{what} {key!r} {problem}" if what else f"{key}: {problem}")


def check_keys(spec: dict, allowed: dict, what: str | None = None, owner: str = "", ignore=()) -> None:
    """Raise ValueError naming the first key of `spec` that `allowed` lacks, or the first REQUIRED key it misses;
    `owner` names what takes the keys in a spec of family `what`."""
    unknown = sorted(set(spec) - set(allowed) - set(ignore))
    if unknown:
        raise setting_error(what, unknown[0], f"is not used by {owner} (allowed: {sorted(allowed)})" if what else
                            f"unknown key (allowed: {sorted(allowed)})")
    missing = [key for key, default in allowed.items() if default == REQUIRED and key not in spec]
    if missing:
        raise setting_error(what, missing[0], f"is required by {owner}" if what else "missing")


def key_table(cls) -> dict:
    """The settings of `cls` as check_keys takes them: name -> default, or REQUIRED."""
    return {f.name: REQUIRED if default_of(f) is MISSING else default_of(f) for f in fields(cls)}


def check_fields(options, what: str | None = None) -> None:
    """Raise ValueError naming the first field whose value is not one of its declared choices or fails its check."""
    for f in fields(options):
        value = getattr(options, f.name)
        if f.metadata.get("choices") and value not in f.metadata["choices"]:
            raise setting_error(what, f.name, f"must be one of {f.metadata['choices']}, got {value!r}")
        if f.metadata.get("check") and not (value is None and f.default is None):
            check_value(f.metadata["check"], value, f.name, what)


def check_value(check, value, key: str, what: str | None = None) -> None:
    """Run a setting's `check` on `value` outside its dataclass, its error naming the setting as check_fields does."""
    try:
        check(value)
    except ValueError as error:
        raise setting_error(what, key, str(error)) from None


def must(condition: str, test):
    """A check: ValueError("must be <condition>, got <value>") where `test(value)` is false."""
    def check(value) -> None:
        if not test(value):
            raise ValueError(f"must be {condition}, got {value!r}")
    return check


def has_type(value, hint) -> bool:
    """`value` fits the annotation: an int is a float, a float (finite) is never an int, a bool is neither."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return value in args
    if origin in (typing.Union, types.UnionType):
        return any(has_type(value, h) for h in args)
    if origin is list:
        return isinstance(value, list) and all(has_type(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(isinstance(k, str) and has_type(v, args[1]) for k, v in value.items())
    if hint is float:
        return is_number(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def type_name(hint) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return f"one of {args}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(h) for h in args)
    if origin is list:
        return f"a list of {type_name(args[0])}"
    if origin is dict:
        return f"a mapping to {type_name(args[1])}"
    return {type(None): "null", float: "a finite number", int: "an integer", bool: "true or false", str: "a string",
            dict: "a mapping", list: "a list"}.get(hint, getattr(hint, "__name__", str(hint)))


def is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def is_bool(value) -> bool:
    return isinstance(value, bool)


def check_int(value, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"must be an integer >= {minimum}, got {value!r}")


def check_positive(value) -> None:
    if not is_number(value) or value <= 0:
        raise ValueError(f"must be a number > 0, got {value!r}")


def check_probabilities(value, allow_list: bool = False) -> None:
    values = value if allow_list and isinstance(value, list | tuple) else [value]
    if not values or not all(is_number(v) and 0 <= v <= 1 for v in values):
        kind = "a probability in [0, 1]" + (" or a list of them" if allow_list else "")
        raise ValueError(f"must be {kind}, got {value!r}")


class Registry(dict):
    """One family's entries by name (trace models, partition schemes, report kinds, or the code that draws or builds
    them), each added where it is defined with `@registry.add(name)`. Looking up a name nobody added raises
    ValueError listing the known ones; `key` is how that error names the setting (e.g. "trace spec key 'model'")."""

    def __init__(self, key: str):
        super().__init__()
        self.key = key

    def add(self, *names: str):
        def register(entry):
            for name in names:
                if name in self:
                    raise ValueError(f"{self.key}: {name!r} is registered twice")
                self[name] = entry
            return entry

        return register

    def __missing__(self, name):
        raise ValueError(f"{self.key}: {name!r} is not one of {tuple(self)}")


def resolve_variant(spec: dict, variants: Registry, tag: str, what: str, kind: str):
    """`spec[tag]` names one of `variants` (a partition scheme, a trace model); the spec checked against that
    variant's dataclass and returned as it. ValueError names the offending key."""
    if not isinstance(spec, dict):
        raise ValueError(f"{kind} spec must be a mapping, got {type(spec).__name__}")
    name = spec.get(tag)
    cls = variants[name]
    check_keys(spec, key_table(cls), what, f"{tag} {name!r}", ignore={tag})
    return cls(**{key: value for key, value in spec.items() if key != tag})
