"""Tables and figures from finished runs.

- tables.py: per-experiment table and curves (rule report_experiment), and the cross-experiment table kinds
- figures.py: the cross-experiment figure kinds (seaborn), each with the numbers it plots
- spec.py: the config's `reports:` section: kinds, validation, each report job's slice, outputs, captions
- build.py: one report job (`fedavail report-set`): load runs, build, write Markdown/LaTeX/CSV or PNG/PDF/CSV
- runs.py: runs as frames, and the statistics (last-N window, last k values, Ratio, rounds to a target)
- compare.py + paper_values.csv: the published numbers of FedSWE Tables 2, 7, 8, 9 and the FAST text, beside ours
- labels.py: an algorithm spec's paper identity, display label and group (memory-free or not)
- render.py: a small table model written as Markdown and LaTeX
- toy.py: FedSWE's scalar examples (Figs. 2 and 5), computed exactly
"""
