"""Typed, torch-free settings resolved from a config: every default is written once, here, and jobs receive the
resolved values (so a changed default shows up as a changed job spec). Nothing here imports the rest of fedavail
(only fedavail.io, to write docs/configuration.md).

Entry point: fedavail.plan.load.load reads a config (grids expanded), validates it against the schema and has
fedavail.plan.plan.build_plan check it (fedavail.plan.checks) and resolve every entry once into the Plan, which gives
every job's spec. The
settings are dataclasses (fedavail.plan.options): partitions, traces, algorithms (one options module per
algorithm), local, experiments, reports; fedavail.plan.schema and fedavail.plan.docs generate the config schema and
docs/configuration.md from them."""
