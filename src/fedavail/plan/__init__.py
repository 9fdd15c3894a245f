"""Typed, torch-free settings resolved from a config: every default is written once, here, and jobs receive the
resolved values (so a changed default shows up as a changed job spec).

  options      declaring a setting (type, default, meaning, allowed values) as a dataclass field
  partitions   one dataclass per partition scheme          traces       one per availability trace model
  algorithms   one per algorithm (the algorithm classes inherit them)
  models       the model names                             local        training.local
  experiments  an experiment, its training block, execution
  config       a whole config checked entry by entry, and the settings each job depends on
  sources      the source files a training run depends on
  schema       workflow/schemas/config.schema.yaml, generated from all of the above
  docs         docs/configuration.md and docs/algorithms.md's tables, generated from all of the above
  grid         grids and algorithm sets, expanded before a config is checked
  reports      one dataclass per report kind (claims, captions: their parsing and wording)"""
