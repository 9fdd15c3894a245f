"""fedavail: federated learning under intermittent client availability, as a reproducible workflow."""

__version__ = "0.1.0"
