"""Typed, torch-free settings resolved from a config, each default written once, here (a changed default is a changed
job spec), and what each trace model draws and each partition scheme splits (numpy). Nothing here imports the rest of
fedavail but fedavail.io (to write the docs). fedavail.plan.load.load gives the Plan, which gives every job's spec."""
