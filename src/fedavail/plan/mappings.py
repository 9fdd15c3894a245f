"""Config mappings combined and trimmed."""


def merge(base: dict, update: dict) -> dict:
    """Nested mappings merged key by key, later values winning (how Snakemake combines several config files)."""
    return {**base, **{key: merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict)
                       else value for key, value in update.items()}}


def without(spec: dict, *keys: str) -> dict:
    """`spec` less `keys`."""
    return {k: v for k, v in spec.items() if k not in keys}
