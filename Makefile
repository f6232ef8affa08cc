# Two entry points for a fresh machine with Python 3.11: `make run` and `make test`.
# Both create .venv (once), install symbnn with its pinned dependencies, then do their job.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORES ?= all
REPORT ?= results/report.html
REPORT_LOG ?= $(basename $(REPORT)).log
# pip on this project's machines prints a warning per missing local index entry: hide them.
PIP_QUIET := 2>&1 | { grep -v "^WARNING: Location" || true; }

.PHONY: run smoke test test-fast install venv-owner report summary clean-results screenshots

$(STAMP): pyproject.toml | venv-owner
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip $(PIP_QUIET)
	# torch first, pinned: the plain name would pull a newer CUDA build of several GB.
	$(BIN)/pip install -q torch==2.14.1 torchvision==0.29.1 $(PIP_QUIET)
	$(BIN)/pip install -q -e ".[test]" $(PIP_QUIET)
	$(BIN)/python -c "import symbnn, torch, zarr, snakemake" 
	touch $(STAMP)

install: $(STAMP)

# A .venv belongs to its checkout: one linked from, or installed for, another clone would have
# its editable install repointed here, silently breaking the other clone. Refuse it, naming both.
venv-owner:
	@here=$$(pwd -P); \
	if [ -e $(VENV) ]; then \
	  real=$$(cd $(VENV) && pwd -P); \
	  if [ "$$real" != "$$here/$(VENV)" ]; then \
	    echo "make: $$here/$(VENV) is a link to $$real, another checkout's virtualenv; remove the link (make builds one for this checkout)" >&2; exit 1; \
	  fi; \
	  for record in $(VENV)/lib/python*/site-packages/symbnn-*.dist-info/direct_url.json; do \
	    [ -e "$$record" ] || continue; \
	    owner=$$(sed -n 's|.*"url": *"file://\([^"]*\)".*|\1|p' "$$record"); \
	    if [ -n "$$owner" ] && [ "$$owner" != "$$here" ]; then \
	      echo "make: $$here/$(VENV) has symbnn installed from $$owner, not from this checkout $$here; a .venv belongs to its checkout: remove it (rm -rf $(VENV)) and make builds one here" >&2; exit 1; \
	    fi; \
	  done; \
	fi

# A finished run is recorded in dvc.lock (dvc.mk's record), so that a plain `dvc push`
# uploads it; a failure there leaves the results computed and says what to do. The run ends
# with its answer: `symbnn summary` (Table 1, the findings, where the report and logs are).
# A Ctrl-C ends Snakemake with status 130 and one line (its logger, on a terminal): make then
# stops as interrupted, without a line of its own.
run: $(STAMP)
	@$(BIN)/snakemake --cores $(CORES) || { status=$$?; \
	  if [ $$status -eq 130 ]; then kill -INT $$PPID; exit 0; fi; exit $$status; }
	@$(QUIET_REPORT)
	@$(MAKE) --no-print-directory record || echo "run: the results are computed; make push records and uploads them"
	@$(BIN)/symbnn summary --report $(REPORT)

# Rewrite every generated block of the docs that is written from the code (docs/configuration.md,
# by symbnn.settings.reference: run it after adding a setting or a method); the blocks measured by
# benchmarks/ are listed, and only their runs rewrite them. A block whose text is the same keeps
# its marker. docs/extending.md says when to run it.
.PHONY: docs
docs: $(STAMP)
	$(BIN)/python -m symbnn.docblocks

# A smoke run: config.yaml's `smoke` experiment (4 networks of 2 epochs, every method, MMD,
# metrics, alignment, Table 1) into results/smoke/, without the further analyses (the
# Snakefile's target rule `experiments`), each job seconds; it ends like `make run`,
# with its report (results/smoke/report.html) and its summary, and records nothing in DVC.
# tests/workflow/test_workflow.py runs it for its tiny workflow run.
SMOKE := experiments --config 'run=["smoke"]'
smoke: REPORT = results/smoke/report.html
smoke: REPORT_TARGETS = $(SMOKE)
smoke: $(STAMP)
	@$(BIN)/snakemake --cores $(CORES) $(SMOKE) || { status=$$?; \
	  if [ $$status -eq 130 ]; then kill -INT $$PPID; exit 0; fi; exit $$status; }
	@$(QUIET_REPORT)
	@$(BIN)/symbnn summary --experiment smoke --report $(REPORT)

# Snakemake's self-contained HTML report: tables, figures and a description of every rule.
# Quiet unless it fails: Snakemake's line per file ("Adding ...", "Loading script code ...")
# goes to REPORT_LOG; a failure shows the log's last lines.
define QUIET_REPORT
mkdir -p $(dir $(REPORT_LOG)); \
$(BIN)/snakemake --report $(REPORT) $(REPORT_TARGETS) > $(REPORT_LOG) 2>&1 || { status=$$?; \
  echo "report: snakemake --report $(REPORT) failed; the end of its log, $(REPORT_LOG):" >&2; \
  tail -n 25 $(REPORT_LOG) >&2; exit $$status; }
endef

report: $(STAMP)
	@$(QUIET_REPORT)
	@echo "Report: $(REPORT) (open it in a browser, e.g. xdg-open $(REPORT)); its log: $(REPORT_LOG)"

# What the last run found (what `make run` ends with), again.
summary: $(STAMP)
	@$(BIN)/symbnn summary --report $(REPORT)

# Two workers, a test file each at a time: the workflow tests spend much of their time starting
# processes one after another, so a second file fills the idle core (`pytest -q` alone also works).
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

# The unit tests only: the end-to-end runs (the workflow; snakemake, make, dvc, the symbnn
# command or child Pythons as subprocesses: marked slow) left out.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not slow"

clean-results:
	rm -rf results .snakemake

include dvc.mk

# Pictures of the report for the README (docs/img/): its first page and Table 1 at 1,400 px, in
# headless Chromium (Debian: apt-get install -y chromium).
screenshots: $(STAMP)
	$(BIN)/python -m symbnn.report.screenshots $(REPORT) docs/img

# The full-batch HMC reference of the experiments of `run` with a `reference` section, and
# the paper's target and every method measured against it (rules/reference.smk): adds to the
# results of `make run`, reusing its target, pool and methods (docs/maths.md 4.7). The report
# is then written over both targets, so that it shows the reference beside the rest (`make
# report` alone writes it over the default target, without the reference).
.PHONY: run-hmc
run-hmc: $(STAMP)
	@$(BIN)/snakemake --cores $(CORES) reference_all
	@$(MAKE) --no-print-directory report REPORT_TARGETS="all reference_all"
	@echo "HMC reference: results/*/report/reference_*.md (diagnostics, mmd, predictive, findings)"

# Why each job of the next `make run` would run, one line per job: the settings whose values
# changed (old -> new), the inputs changed or rebuilt first, or the missing output.
.PHONY: why
why: $(STAMP)
	@$(BIN)/symbnn why
