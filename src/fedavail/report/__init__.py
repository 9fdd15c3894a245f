"""Tables and figures from finished runs, all from one tidy frame of them (frame.py); `fedavail report` runs one report
job (build.py). Report specs, their defaults and output paths: fedavail.plan.reports (no torch, no pandas)."""

from fedavail.options import Registry

# Per report kind (fedavail.plan.reports.KINDS) and "experiment": (job, frame) -> (a TextTable or a figure, the numbers
# it shows), registered where it is defined (tables.py, figures.py, claims.py).
BUILDERS = Registry("report kind")
