"""Datasets: download, verification and preparation into compact tensors (their client partitions:
fedavail.partitions)."""
