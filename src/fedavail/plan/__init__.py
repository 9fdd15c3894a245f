"""Typed, torch-free settings resolved from a config: every default is written once, here, and jobs receive the
resolved values (so a changed default shows up as a changed job spec). Nothing here imports the rest of fedavail
(only fedavail.io, to write docs/configuration.md).

Entry points: fedavail.plan.load.load_config reads a config, and fedavail.plan.plan.build_plan checks it and resolves
every entry once into the Plan, which gives every job's spec.

  load           reading config files strictly, merging them, expanding grids (load_config)
  plan           the Plan: the checked config, every entry resolved, the runs and every job's spec (build_plan)
  checks         every check of a config beyond its schema, run by build_plan
  config         ConfigError, and the resolvers of each kind of entry (build_plan calls each once per entry)
  paths          where every stage's files are: one template per kind of file
  grid           grids and algorithm sets, expanded before a config is checked
  options        declaring a setting (type, default, meaning, allowed values) as a dataclass field; checking keys
  partitions     one dataclass per partition scheme          traces       one per availability trace model
  algorithms     the algorithm registry: one module of options per algorithm (its class inherits them)
  models         the model names                             local        training.local
  experiments    an experiment, its training block and augmentation, the execution block
  reports        one dataclass per report kind               captions     the reports' wording
  claim_parsing  the claims of a `claims` report, parsed into checks over cells of the runs
  sources        the source files a training run depends on
  schema         workflow/schemas/config.schema.yaml, generated from all of the above
  docs           docs/configuration.md and docs/algorithms.md's tables, generated from all of the above"""
