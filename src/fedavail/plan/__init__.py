"""Config → Plan → runs and jobs, torch- and pandas-free: the typed settings of experiments, local optimisation, models
and each algorithm's options (algorithms/), each default written once here (a changed default is a changed job spec);
the checks of a whole config; the job specs, output paths and captions. Trace models and partition schemes keep their
settings in their own rooms (fedavail.availability.trace_models, fedavail.partitions.schemes). fedavail.plan.load.load
gives the Plan, which gives every job's spec."""
