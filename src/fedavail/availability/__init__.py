"""Client availability traces: drawn from the models of fedavail.plan.traces, stored and plotted (traces.py)."""
