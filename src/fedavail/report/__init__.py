"""Tables and figures from finished runs, all computed from one tidy frame of them.

- frame.py: the tidy frame (one row per run × round, settings as columns), the report's view of it (scored model,
  labels, groups, order) and the statistics (last-N window, last k values, Ratio, sampled curves, mean ± std over seeds)
- tables.py: the table kinds and the per-experiment table; figures.py: the figure kinds (matplotlib)
- claims.py: the papers' claims evaluated on the runs (parsed by fedavail.plan.claim_parsing)
- build.py: one report job (`fedavail report`): load, build, write Markdown/LaTeX/CSV, PNG/PDF/CSV or parquet
- compare.py + paper_values.csv: the published numbers of FedSWE Tables 2, 7, 8, 9 and the FAST text, beside ours
- labels.py: a run's paper identity, display label and group (memory-free or not)
- render.py: a small table model written as Markdown and LaTeX
- toy.py: FedSWE's scalar examples (Figs. 2 and 5), computed exactly

The report specs, their defaults and output paths are fedavail.plan.reports (torch- and pandas-free)."""

from fedavail.plan.options import Registry

# What builds each report kind (fedavail.plan.reports.KINDS, same names) and the per-experiment table ("experiment"):
# a function (job, frame) -> (a TextTable or a figure, the numbers it shows), added where it is defined (tables.py,
# figures.py, claims.py) with @BUILDERS.add(kind).
BUILDERS = Registry("report kind")
