"""The source files a training run's numbers depend on, relative to the fedavail package: editing one reruns
training (the workflow's inputs) and refuses to resume a checkpoint made by other code (fedavail.train)."""

TRAINING_SOURCES = ("train.py", "engine", "algorithms", "models", "plan", "data/augment.py", "rng.py", "divergence.py")
