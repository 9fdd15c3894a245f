"""Typed, torch-free settings resolved from a config: every default is written once, here, and jobs receive the
resolved values (a changed default is a changed job spec). Nothing here imports the rest of fedavail but fedavail.io
(to write the docs). The entry point, fedavail.plan.load.load, gives the Plan, which gives every job's spec."""
