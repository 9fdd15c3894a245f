"""The source files a training run's numbers depend on, relative to the fedavail package: editing one reruns
training (the workflow's inputs) and refuses to resume a checkpoint made by other code (fedavail.train)."""

# Of the plan layer only the settings training reads: editing a report's or a grid's code reruns no training.
TRAINING_SOURCES = ("train.py", "engine", "algorithms", "models", "plan/local.py", "plan/algorithms.py",
                    "plan/experiments.py", "plan/options.py", "plan/models.py", "data/augment.py", "rng.py",
                    "divergence.py")
