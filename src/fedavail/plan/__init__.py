"""Typed, torch-free settings resolved from a config: every default is written once, here, and jobs receive the
resolved values (so a changed default shows up as a changed job spec). Nothing here imports the rest of fedavail
(only fedavail.io, to write docs/configuration.md). The entry point, fedavail.plan.load.load, gives the Plan, which
gives every job's spec; the config schema and docs/configuration.md are generated from the settings' dataclasses."""
