"""Checking the keys of a settings mapping (partition schemes, trace models, report kinds) against what it takes."""

REQUIRED = "required"  # the default of a key that has none


def check_keys(spec: dict, allowed: dict, what: str, owner: str, ignore=()) -> None:
    """Raise ValueError naming the first key of `spec` that `allowed` lacks, or the first REQUIRED key it misses."""
    unknown = sorted(set(spec) - set(allowed) - set(ignore))
    if unknown:
        raise ValueError(f"{what} {unknown[0]!r} is not used by {owner} (allowed: {sorted(allowed)})")
    missing = [key for key, default in allowed.items() if default == REQUIRED and key not in spec]
    if missing:
        raise ValueError(f"{what} {missing[0]!r} is required by {owner}")
