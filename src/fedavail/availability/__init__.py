"""Client availability: the trace models, their settings and what each draws (models.py); drawing, storing and plotting
a trace (traces.py)."""
