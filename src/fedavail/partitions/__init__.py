"""Client partitions of a training set: the schemes, their settings and how each splits the samples (schemes.py);
drawing, storing, describing and plotting a partition (partition.py)."""
