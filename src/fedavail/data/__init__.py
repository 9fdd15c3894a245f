"""Datasets: download, verification, preparation into compact tensors, and client partitions."""
