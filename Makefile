# ablate — every target works on a fresh clone: each depends on .venv, which builds the environment.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# These two come from local disk on the project's machines; elsewhere pip downloads them.
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
# Every other package at the exact version CI tested (a new release lands only by a commit of this file)
CONSTRAINTS ?= .ci/constraints.txt
BUDGET ?= quick
SWEEPS := $(basename $(notdir $(wildcard sweeps/*.yaml)))

.DEFAULT_GOAL := help

help: ## list the targets
	@grep -hE '^[a-zA-Z_%-]+:.*?## ' $(MAKEFILE_LIST) | sort | \
		awk 'BEGIN {FS = ":.*?## "}; {printf "  %-16s %s\n", $$1, $$2}'
	@echo "  sweep-<name>     run sweeps/<name>.yaml (BUDGET=<budget>, default quick; ablate sweep --help lists them): $(SWEEPS)"
	@echo "  results-<name>   print the results table of a sweep"

# Everything installed is byte-compiled here: where PYTHONDONTWRITEBYTECODE is set (as on CI's machine) nothing
# compiled later is kept, and every test process would compile torch again (no compiling made CI 1.6x slower).
# pip would compile each package as it unpacks it, on one core; instead what the torch install brought is
# compiled while pip unpacks the rest (with the same constraints, it leaves those folders alone), and the rest
# after, on every core. compileall's exit status is not kept: as with pip's compiling, a package's deliberately
# invalid .py files (templates, tests of syntax errors) are no failure.
SITE = $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
COMPILE = $(BIN)/python -m compileall -qq -j 0
$(VENV)/.installed: pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q --no-compile -c $(CONSTRAINTS) $(TORCH_SPEC)
	first=$$(ls -d $(SITE)/*); { $(COMPILE) $$first >/dev/null 2>&1 || true; } & compiling=$$!; \
	  $(BIN)/pip install -q --no-compile -c $(CONSTRAINTS) -e '.[dev,reports]'; status=$$?; wait $$compiling; exit $$status
	$(COMPILE) $(SITE) >/dev/null 2>&1 || true
	touch $@

venv: $(VENV)/.installed ## create the virtualenv and install ablate (+ dev, reports extras)

# pytest-xdist workers for make test and make coverage (auto: one per core, at most 8); 0 runs the tests in one process
TEST_WORKERS ?= auto

test: venv ## run the test suite on every core (what CI runs): its wall time and 25 slowest tests at the end
	@start=$$(date +%s); $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --maxprocesses 8 --durations=25; status=$$?; \
	  echo "make test: $$(( $$(date +%s) - start )) s wall time"; exit $$status

coverage: venv ## make test under coverage.py: line coverage of ablate/ (subprocesses included), per file and in all
	rm -f .coverage .coverage.*
	COVERAGE_FILE=$(CURDIR)/.coverage $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --maxprocesses 8 --cov=ablate --cov-report= ; \
	  status=$$?; $(BIN)/coverage combine --append -q 2>/dev/null; $(BIN)/coverage report; exit $$status

readme: venv ## rewrite the manual's generated tables (README.md, docs/: tasks, toggles, studies) from the commands that print them
	$(BIN)/python -m ablate.readme

lint: venv ## ruff check
	$(BIN)/ruff check ablate tests docs

train: venv ## train the tutorial's configuration once (ARGS="model.n_heads=8 ...")
	$(BIN)/ablate train $(ARGS)

bench: venv ## training speed: torch's encoder vs a plain encoder vs ablate's
	$(BIN)/ablate bench

sweep-%: venv
	$(BIN)/ablate sweep sweeps/$*.yaml --budget $(BUDGET)

sweeps: venv ## run every sweep in sweeps/ (BUDGET=<budget>, default quick; ablate sweep --help lists them)
	@set -e; for s in $(SWEEPS); do echo "== sweep $$s ($(BUDGET))"; $(BIN)/ablate sweep sweeps/$$s.yaml --budget $(BUDGET); done

results-%: venv
	$(BIN)/ablate results $*

REPORT_DATA := reports/data
# FORCE=1: let runs of a smaller budget (smoke < quick < none < full), or fewer runs (a sweep stopped
# part way), replace an exported table
REPORT_FORCE := $(if $(filter 1 yes true,$(FORCE)),--replace)

report: venv $(REPORT_DATA)/attention_cost.csv $(REPORT_DATA)/rnn_cost.csv ## export the sweeps' results to reports/data (a smaller budget or fewer runs replace a table only with FORCE=1), run every report notebook (reports/build/index.html and index.zh.html, reports/FINDINGS.md, reports/FINDINGS.zh.md)
	$(BIN)/ablate report all --data $(REPORT_DATA) --out reports $(REPORT_FORCE)

report-export: venv ## copy the results of the sweeps that have runs into reports/data (CSV, NPZ, meta.json; FORCE=1 as for report)
	$(BIN)/ablate report export --data $(REPORT_DATA) $(REPORT_FORCE)

report-build: venv ## run the report notebooks on reports/data only: HTML, figures, FINDINGS.md, FINDINGS.zh.md
	$(BIN)/ablate report build --data $(REPORT_DATA) --out reports

report-shots: venv ## screenshots of reports/build/index.html and index.zh.html in headless Chromium (reports/screenshots; needs chromium and fonts-noto-cjk)
	$(BIN)/python -m ablate.report.shots reports/build reports/screenshots

bench-attention: venv ## attention time and memory against sequence length, fused vs explicit
	$(BIN)/ablate bench attention --csv $(REPORT_DATA)/attention_cost.csv

$(REPORT_DATA)/attention_cost.csv: | venv
	$(BIN)/ablate bench attention --csv $@

bench-rnn: venv ## one training step of an LSTM and the Transformer against sequence length (reports/data/rnn_cost.csv)
	$(BIN)/ablate bench rnn --csv $(REPORT_DATA)/rnn_cost.csv

$(REPORT_DATA)/rnn_cost.csv: | venv
	$(BIN)/ablate bench rnn --csv $@

# The explorer's models: name=overrides (joined by +), trained once each into $(EXPLORE_RUNS)/<name>; their one
# home is ablate/explore/shipped.py (SHIPPED), which the browser tests also build.
EXPLORE_MODELS ?= $(shell $(BIN)/python -m ablate.explore.shipped)
EXPLORE_BUDGET ?= quick
EXPLORE_RUNS ?= runs/explore
EXPLORE_PAGE ?= reports/explorer.html
explore: venv ## rebuild reports/explorer.html (committed: offline, self-contained) and its screenshot, training first any of its 15 models (13 MNIST rows, 2 copy) not in runs/explore (EXPLORE_BUDGET=quick)
	@set -e; for spec in $(EXPLORE_MODELS); do name=$${spec%%=*}; args=$${spec#*=}; \
	  if grep -qs '"status": "completed"' $(EXPLORE_RUNS)/$$name/summary.json; then \
	    echo "$(EXPLORE_RUNS)/$$name: trained already, kept"; \
	  else $(BIN)/ablate train budget=$(EXPLORE_BUDGET) tracking=none run.probes=false \
	    run.dir=$(EXPLORE_RUNS)/$$name $${args//+/ }; fi; done
	$(BIN)/ablate explore $(foreach spec,$(EXPLORE_MODELS),$(EXPLORE_RUNS)/$(firstword $(subst =, ,$(spec)))) --out $(EXPLORE_PAGE)
	@$(BIN)/python -m ablate.explore.screenshot $(EXPLORE_PAGE) $(dir $(EXPLORE_PAGE))figures/explorer.png \
	  || echo "explore: no screenshot (Chromium or Playwright missing); the page is built"

docs: venv ## the manual (README.md and docs/) as a static site in site/; a broken link or anchor fails it
	$(BIN)/mkdocs build

explore-shots: venv ## screenshots of the explorer's nine demos and demo 1's copy part (Q1), English and Chinese, at 1280 and 390 px, into docs/explorer/ (needs chromium and fonts-noto-cjk)
	$(BIN)/python -m ablate.explore.screenshot $(EXPLORE_PAGE) --demos docs/explorer

explore-bench: venv ## the explorer page's load and redraw times in headless Chromium, against the page of BEFORE=<git revision> (default HEAD~1), same run
	@git show $(or $(BEFORE),HEAD~1):$(EXPLORE_PAGE) > .explore-before.html
	$(BIN)/python -m ablate.explore.bench $(EXPLORE_PAGE) --before .explore-before.html; status=$$?; rm -f .explore-before.html; exit $$status

clean: ## remove the virtualenv and caches (keeps runs/ and data/)
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info .coverage .coverage.*

.PHONY: help venv test coverage readme docs lint train bench sweeps report report-export report-build report-shots bench-attention explore explore-shots clean
