"""Tables and figures from finished runs, all computed from one tidy frame of them (frame.py); `fedavail report` runs
one report job (build.py). The report specs, their defaults and output paths are fedavail.plan.reports (torch- and
pandas-free)."""

from fedavail.plan.options import Registry

# Per report kind (fedavail.plan.reports.KINDS) and "experiment": (job, frame) -> (a TextTable or a figure, the numbers
# it shows), registered where it is defined (tables.py, figures.py, claims.py).
BUILDERS = Registry("report kind")
