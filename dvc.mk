# Results under DVC (docs/dvc.md). Included by the Makefile; also usable as `make -f dvc.mk`.
#
#   make push                      after a run: refuse unless Snakemake has nothing left to do,
#                                  record every result's hash in dvc.lock, upload to the remote;
#                                  then `git add dvc.lock && git commit`
#   make pull                      on a fresh clone: download every result dvc.lock names, adopt
#   make pull-experiment EXP=NAME  only the checkpoints (weight stores) of one experiment, adopt
#   make adopt [EXP=NAME]          after a `dvc pull` / `dvc checkout` typed by hand: mark the
#                                  restored results up to date for Snakemake (docs/dvc.md: why)
#   make verify [EXP=NAME]         results on disk are those dvc.lock records, stores read whole
#   make dvc-remote DVC_REMOTE=X   use X (a path or URL) as the remote of this checkout only
#
# DVC_REMOTE set in the environment points push and pull at X the same way.

# Overridable, so that `make -f dvc.mk` works without the Makefile (the tests use it).
DVC_PY ?= $(or $(BIN),.venv/bin)/python
DVC_STAMP ?= $(or $(STAMP),.venv/.installed)
# The folders of an experiment's results that hold checkpoints (weight stores): the target
# posterior, the pool of modes, the methods' samples (and predictions), canonical forms.
CHECKPOINTS ?= posterior modes methods canonical
DVC_RESULTS ?= $(shell $(DVC_PY) -c 'import yaml; print(yaml.safe_load(open("config.yaml")).get("results", "results"))')

DVC = $(DVC_PY) -m dvc
DVC_SNAKEMAKE = $(DVC_PY) -m snakemake
DVC_EXP_CONFIG = $(if $(EXP),--config 'run=["$(EXP)"]')
export DVC_NO_ANALYTICS := 1

.PHONY: push pull pull-experiment adopt verify dvc-remote

# Point the remote named `results` at $(DVC_REMOTE), in .dvc/config.local (not in git).
define dvc_use_remote
$(if $(DVC_REMOTE),$(DVC) remote add --local --force results '$(DVC_REMOTE)')
endef

# Refuse to adopt results whose experiment settings (config.yaml) differ from those dvc.lock
# recorded for them; FORCE=1 adopts anyway. Changed code is only reported.
define DVC_ADOPT_GUARD
import json, os, subprocess, sys
run = subprocess.run([sys.executable, "-m", "dvc", "status", "--json", *sys.argv[1:]], capture_output=True, text=True)
if run.returncode:
    sys.exit(f"adopt: dvc status failed:\n{run.stdout}{run.stderr}")
settings = []
for stage, changes in json.loads(run.stdout or "{}").items():
    for change in changes:
        deps = change.get("changed deps", {}) if isinstance(change, dict) else {}
        for path, what in deps.items():
            if isinstance(what, dict):
                settings += [f"  {stage}: {path}: {key} {state}" for key, state in what.items()]
            else:
                print(f"adopt: note: {stage}: {path} {what} since dvc.lock was written")
if settings:
    print("adopt: config.yaml differs from the settings that produced these results (dvc.lock):")
    print("\n".join(settings))
    if os.environ.get("FORCE") != "1":
        sys.exit("adopt: refusing to mark them up to date; restore config.yaml (git checkout config.yaml),\n"
                 "       or run the workflow to recompute them, or FORCE=1 to adopt them anyway")
endef
export DVC_ADOPT_GUARD

# Mark restored results up to date: `--touch --forceall` touches every output in DAG order
# (upstream first) and records Snakemake's provenance (params, code, input) for each, so later
# edits of config.yaml rerun what they affect, as on the machine that ran the workflow.
# Outputs not on disk are skipped with a warning: `snakemake -n` then shows what is left.
define dvc_adopt
@$(DVC_PY) -c "$$DVC_ADOPT_GUARD" $(if $(EXP),experiment@$(EXP))
$(DVC_SNAKEMAKE) --touch --forceall --cores 1 --quiet progress $(DVC_EXP_CONFIG)
endef

# Every file DVC tracks and finds changed or missing inside a store that is on disk, or changed
# anywhere; then every store on disk read chunk by chunk (symbnn.store's validate).
define DVC_VERIFY
import json, subprocess, sys
from pathlib import Path
from symbnn.predictions import validate_any
from symbnn.store import StoreError
root = Path(sys.argv[1])
run = subprocess.run([sys.executable, "-m", "dvc", "data", "status", "--granular", "--json"], capture_output=True, text=True)
if run.returncode:
    sys.exit(f"verify: dvc data status failed:\n{run.stdout}{run.stderr}")
changed = json.loads(run.stdout or "{}").get("uncommitted", {})
stores = sorted(p for p in root.rglob("*.zarr") if p.is_dir() and ".zarr" not in str(p.parent))
def in_store(path):
    return any(Path(path).is_relative_to(store) for store in stores)
bad = [f"  {state}: {path}" for state in ("modified", "added") for path in changed.get(state, [])
       if Path(path).is_relative_to(root) and not path.endswith("/")]
bad += [f"  deleted: {path}" for path in changed.get("deleted", []) if in_store(path)]
absent = [path for path in changed.get("deleted", []) if Path(path).is_relative_to(root) and not in_store(path)]
if absent:
    print(f"verify: {len(absent)} tracked path(s) under {root} are not on disk (not pulled, or removed)")
if bad:
    print("verify: these files differ from what dvc.lock records (`dvc checkout --force PATH` restores them):")
    print("\n".join(bad))
invalid = 0
for store in stores:
    try:
        validate_any(store)
        print(f"OK: {store}")
    except StoreError as exc:
        invalid += 1
        print(f"INVALID: {exc}")
if bad or invalid:
    sys.exit(f"verify: FAILED ({len(bad)} changed file(s), {invalid} invalid store(s))")
print(f"verify: {len(stores)} store(s) OK")
endef
export DVC_VERIFY

dvc-remote:
	@test -n "$(DVC_REMOTE)" || { echo "usage: make dvc-remote DVC_REMOTE=/path/or/url"; exit 2; }
	$(dvc_use_remote)

push: $(DVC_STAMP)
	@out=$$($(DVC_SNAKEMAKE) --dry-run 2>&1) || { printf '%s\n' "$$out"; exit 1; }; \
	case "$$out" in *"Nothing to be done"*) ;; *) printf '%s\n' "$$out"; \
	  echo "push: Snakemake has jobs left to run (above): finish the workflow first, so that"; \
	  echo "      dvc.lock records results that match config.yaml"; exit 1;; esac
	$(dvc_use_remote)
	$(DVC) commit --force
	$(DVC) push
	@if test -n "$$(git status --porcelain -- dvc.lock 2>/dev/null)"; then \
	  echo "dvc.lock changed: git add dvc.lock && git commit, so that clones pull these results"; fi

pull: $(DVC_STAMP)
	$(dvc_use_remote)
	$(DVC) pull
	$(dvc_adopt)

pull-experiment: $(DVC_STAMP)
	@test -n "$(EXP)" || { echo "usage: make pull-experiment EXP=NAME [CHECKPOINTS='posterior ...']"; exit 2; }
	$(dvc_use_remote)
	$(DVC) pull $(foreach part,$(CHECKPOINTS),$(DVC_RESULTS)/$(EXP)/$(part))
	$(dvc_adopt)

adopt: $(DVC_STAMP)
	$(dvc_adopt)

verify: $(DVC_STAMP)
	@$(DVC_PY) -c "$$DVC_VERIFY" $(DVC_RESULTS)$(if $(EXP),/$(EXP))
