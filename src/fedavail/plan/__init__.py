"""Typed, torch-free settings resolved from a config: every default is written once, here, and jobs receive the
resolved values (so a changed default shows up as a changed job spec)."""

from fedavail.plan.local import LocalOptions, resolve_local

__all__ = ["LocalOptions", "resolve_local"]
