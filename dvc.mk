# Results under DVC (docs/dvc.md). Included by the Makefile; also usable as `make -f dvc.mk`.
#
#   make record                    after a run (`make run` ends with it): unless Snakemake has
#                                  jobs left, record every result's hash in dvc.lock, so that a
#                                  plain `dvc push` uploads them and `dvc status -c` lists what
#                                  the remote lacks
#   make push                      after a run: refuse unless Snakemake has nothing left to do,
#                                  record every result's hash in dvc.lock, upload to the remote;
#                                  then `git add dvc.lock && git commit`. If the upload fails,
#                                  dvc.lock is left as it was.
#   make pull                      on a fresh clone: `dvc pull`, quiet, naming the remote when
#                                  it fails; Snakemake adopts the results (src/symbnn/pulled.py)
#   make pull-experiment EXP=NAME  only the checkpoints (weight stores) of one experiment, adopt
#   make adopt [EXP=NAME]          after a `dvc pull` / `dvc checkout` typed by hand: mark the
#                                  restored results up to date for Snakemake (docs/dvc.md: why)
#   make verify [EXP=NAME]         results on disk are those dvc.lock records, the DVC cache
#                                  objects match their hashes, stores read whole; fails when
#                                  there is nothing to verify, when any file dvc.lock records
#                                  is missing (but for what make pull-experiment EXP=NAME left
#                                  out on purpose, with EXP=NAME), or when dvc.lock cannot be read
#   make dvc-remote DVC_REMOTE=X   use X (a path or URL) as the remote of this checkout only
#                                  (saved in .dvc/config.local)
#   make upgrade-stores            stores of the format before the digest (e.g. pulled from an
#                                  older remote): verify every chunk, record manifest and digest
#                                  (docs/stores.md); the workflow stops while any is left
#
# DVC_REMOTE=X given to push, pull or pull-experiment (on the command line or in the
# environment) points that one call at X; nothing is saved.

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
# What `make pull-experiment` pulls of the experiment's folder.
PULLED_PARTS = $(foreach part,$(CHECKPOINTS) logs benchmarks,$(DVC_RESULTS)/$(EXP)/$(part))
export DVC_NO_ANALYTICS := 1

.PHONY: record push pull pull-experiment adopt verify dvc-remote upgrade-stores

# Point the remote named `results` at $(DVC_REMOTE), in .dvc/config.local (not in git).
define dvc_use_remote
$(if $(DVC_REMOTE),$(DVC) remote add --local --force results '$(DVC_REMOTE)')
endef

# The DVC command line, with the remote `results` pointed at DVC_REMOTE (when set) for this
# call only: the url is merged into the configuration DVC reads (Repo's remote_config), never
# written to a config file. A relative path is taken from the current folder.
define DVC_CLI
import os, sys
url = os.environ.get("DVC_REMOTE", "")
if url:
    if "://" not in url:
        url = os.path.abspath(url)
    from dvc.repo import Repo
    original = Repo.__init__
    def per_call_remote(self, *args, **kwargs):
        kwargs["remote_config"] = {**(kwargs.get("remote_config") or {}), "url": url}
        original(self, *args, **kwargs)
    Repo.__init__ = per_call_remote
from dvc.cli import main
sys.exit(main(sys.argv[1:]))
endef
export DVC_CLI
DVC_CALL = DVC_REMOTE='$(DVC_REMOTE)' $(DVC_PY) -c "$$DVC_CLI"

# Record the results in dvc.lock and upload them; if either step fails, put dvc.lock back as
# it was, so that git never sees hashes of results the remote does not hold.
define DVC_PUSH
import os, subprocess, sys
from pathlib import Path
lock = Path("dvc.lock")
before = lock.read_bytes() if lock.exists() else None
cli = [sys.executable, "-c", os.environ["DVC_CLI"]]
for step in (["commit", "--force"], ["push"]):
    if subprocess.run([*cli, *step]).returncode:
        if before is None:
            lock.unlink(missing_ok=True)
        else:
            lock.write_bytes(before)
        sys.exit(f"push: `dvc {' '.join(step)}` failed (above); dvc.lock is left as it was. "
                 "Fix the remote (make dvc-remote, or DVC_REMOTE=...) and run make push again")
# these results are Snakemake's own here: nothing for the Snakefile to adopt (symbnn.pulled)
from symbnn.pulled import mark_adopted
mark_adopted()
endef
export DVC_PUSH

# `dvc commit` of every stage, timed; the results are Snakemake's own here, so nothing is left
# for the Snakefile to adopt (symbnn.pulled).
define DVC_RECORD
import subprocess, sys, time
start = time.monotonic()
run = subprocess.run([sys.executable, "-m", "dvc", "commit", "--force", "--quiet"])
if run.returncode:
    sys.exit("record: `dvc commit` failed (above): dvc.lock does not record these results; "
             "make push records and uploads them")
from symbnn.pulled import mark_adopted
mark_adopted()
print(f"record: dvc.lock records the results ({time.monotonic() - start:.1f} s): `dvc push` "
      "uploads them, `dvc status -c` lists what the remote lacks; commit dvc.lock after the push")
endef
export DVC_RECORD

# `dvc pull` (through DVC_CLI), quiet; when it fails, say which remote it tried and what to do.
# After it, the next Snakemake run adopts the restored results (src/symbnn/pulled.py).
define DVC_PULL
import os, subprocess, sys
from pathlib import Path
run = subprocess.run([sys.executable, "-c", os.environ["DVC_CLI"], "pull", *sys.argv[1:]],
                     capture_output=True, text=True)
lines = (run.stdout + run.stderr).strip().splitlines()
if run.returncode == 0:
    print("\n".join(line for line in lines if not line.startswith(("A ", "M ", "D "))))
    if not sys.argv[1:]:  # everything: nothing is left out on purpose any more
        from symbnn.pulled import forget_partial_pulls
        forget_partial_pulls()
    sys.exit(0)
url = os.environ.get("DVC_REMOTE", "")
if not url:
    listed = subprocess.run([sys.executable, "-m", "dvc", "remote", "list"], capture_output=True, text=True)
    url = next((l.split()[1] for l in listed.stdout.splitlines() if "(default)" in l), "(none)")
where = f"the DVC remote 'results' at {url}"
if "://" not in url and not Path(url).exists():
    where += " (no such folder)"
print("\n".join(lines[-15:]), file=sys.stderr)
sys.exit(f"pull: could not download the results dvc.lock records from {where}.\n"
         "      On the machine that ran the workflow, make push uploads them; to use another\n"
         "      remote: make dvc-remote DVC_REMOTE=PATH_OR_URL, or DVC_REMOTE=... make pull")
endef
export DVC_PULL

# What `make pull-experiment EXP=NAME` can pull: an experiment under `run:` (dvc.yaml has a
# stage for those only) whose results dvc.lock records; else say so instead of DVC's error.
define DVC_EXPERIMENT_GUARD
import sys
from pathlib import Path
import yaml
from symbnn.pulled import LockError, locked_outputs
name = sys.argv[1]
config = yaml.safe_load(Path("config.yaml").read_text()) or {}
run = config.get("run") or []
if name not in run:
    sys.exit(f"pull-experiment: {name} is not under run: in config.yaml (run: {', '.join(run)}); "
             "dvc.yaml versions the experiments of run: only: add it there, as on the machine "
             "that ran it, then pull")
folder = f"{config.get('results', 'results')}/{name}"
try:
    locked = locked_outputs() if Path("dvc.lock").is_file() else {}
except LockError as exc:
    sys.exit(f"pull-experiment: {exc}")
if folder not in locked:
    sys.exit(f"pull-experiment: dvc.lock records no results of {name}: on the machine that ran "
             "it, make run && make push, then commit dvc.lock and pull it here (git pull)")
endef
export DVC_EXPERIMENT_GUARD

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

# What `make verify` checks, in order: the target is on disk and dvc.lock records it; every
# DVC cache object of it (and each directory's file listing) hashes to its name; the files DVC
# finds changed or missing inside a store that is on disk, or changed anywhere; every file it
# records is on disk, but for the parts of an experiment's folder `make pull-experiment` left
# out on purpose when the target is that folder (EXP=NAME); every store on disk read chunk by
# chunk (symbnn.store's validate: checksums, NaN). Remedies printed are per file and never
# delete anything: a damaged cache object is moved aside, not removed.
define DVC_VERIFY
import hashlib, json, os, subprocess, sys
from pathlib import Path
root = Path(sys.argv[1])
def md5sum(path):
    digest = hashlib.md5()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()
if not root.is_dir():
    sys.exit(f"verify: FAILED: {root} is not on disk, so there is nothing to verify\n"
             "        (make pull, or make pull-experiment EXP=NAME, downloads it)")
lock = Path("dvc.lock")
if not lock.is_file():
    sys.exit("verify: FAILED: no dvc.lock: no results are recorded to verify against (make push records them)")
from symbnn.store.predictions import validate_any
from symbnn.pulled import LockError, locked_outputs, partially_pulled, pulled_parts
from symbnn.store import StoreError
# what `make pull-experiment` pulled, when the target is an experiment it pulled in part
parts = pulled_parts(str(root))
def wanted(path):
    return parts is None or any(Path(path).is_relative_to(part) for part in parts)
try:
    locked = locked_outputs(lock)
except LockError as exc:
    sys.exit(f"verify: FAILED: {exc}")
outs = {path: md5 for path, (_, md5) in locked.items()
        if Path(path).is_relative_to(root) or root.is_relative_to(Path(path))}
if not outs:
    sys.exit(f"verify: FAILED: dvc.lock records nothing under {root}")
missing = sorted(out for out in outs if not Path(out).exists())
from dvc.repo import Repo
cache = Path(os.path.relpath(Repo(".").cache.local.path))
def cached(md5):
    return cache / md5[:2] / md5[2:]
recorded, damaged, unlisted, uncached = {}, [], [], 0
for out, md5 in outs.items():
    if not md5:
        sys.exit(f"verify: FAILED: dvc.lock records no hash for {out} (make push records it)")
    if not md5.endswith(".dir"):
        recorded[out] = md5
        continue
    listing = cached(md5)
    if not listing.is_file():  # its files cannot be told; a missing output is named as such
        if out not in missing:
            unlisted.append(f"  {out} ({listing}; dvc fetch {out} downloads it)")
        continue
    if md5sum(listing) + ".dir" != md5:
        sys.exit(f"verify: FAILED: the DVC cache object {listing} (the file listing of {out}) is damaged;\n"
                 f"        mv {listing} {listing}.damaged && dvc fetch {out}")
    for entry in json.loads(listing.read_text()):
        recorded[f"{out}/{entry['relpath']}"] = entry["md5"]
recorded = {path: md5 for path, md5 in recorded.items() if Path(path).is_relative_to(root)}
left_out = {path for path in recorded if not wanted(path) and not Path(path).exists()}
recorded = {path: md5 for path, md5 in recorded.items() if path not in left_out}
checked = {}
for path, md5 in sorted(recorded.items()):
    obj = cached(md5)
    if md5 not in checked:
        checked[md5] = md5sum(obj) == md5 if obj.is_file() else None
    if checked[md5] is None:
        uncached += 1
    elif not checked[md5]:
        intact = Path(path).is_file() and md5sum(path) == md5
        fix = f"cp {path} {obj}" if intact else f"dvc fetch {path}"
        damaged.append(f"  damaged cache object {obj} ({path}):\n      mv {obj} {obj}.damaged && {fix}")
run = subprocess.run([sys.executable, "-m", "dvc", "data", "status", "--granular", "--json"], capture_output=True, text=True)
if run.returncode:
    sys.exit(f"verify: dvc data status failed:\n{run.stdout}{run.stderr}")
changed = json.loads(run.stdout or "{}").get("uncommitted", {})
stores = sorted(p for p in root.rglob("*.zarr") if p.is_dir() and ".zarr" not in str(p.parent))
def in_store(path):
    return any(Path(path).is_relative_to(store) for store in stores)
bad = [(state, path) for state in ("modified", "added") for path in changed.get(state, [])
       if Path(path).is_relative_to(root) and not path.endswith("/")]
bad += [("deleted", path) for path in changed.get("deleted", []) if in_store(path)]
absent = [path for path in changed.get("deleted", []) if Path(path).is_relative_to(root)
          and not in_store(path) and not path.endswith("/") and path not in left_out
          and not any(Path(path).is_relative_to(out) for out in missing)]  # named below
if recorded and len(absent) >= len(recorded):
    sys.exit(f"verify: FAILED: none of the {len(recorded)} file(s) dvc.lock records under {root} is on disk\n"
             "        (make pull, or make pull-experiment EXP=NAME, downloads them)")
GET = "make pull or dvc pull downloads them; make run recomputes them"
if missing:
    print(f"verify: these outputs dvc.lock records are not on disk ({GET}):")
    print("\n".join(f"  {out}" for out in missing))
if absent:
    print(f"verify: {len(absent)} file(s) dvc.lock records under {root} are not on disk ({GET}):")
    print("\n".join(f"  {path}" for path in sorted(absent)[:10]))
    if len(absent) > 10:
        print(f"  ... and {len(absent) - 10} more")
if unlisted:
    print(f"verify: the local DVC cache lacks the file listing of these outputs, so their files "
          f"cannot be checked ({GET}):")
    print("\n".join(unlisted))
for folder in partially_pulled() if missing or absent or unlisted else ():
    if Path(folder).is_relative_to(root) and folder != str(root):
        print(f"verify: make pull-experiment pulled part of {folder} on purpose: "
              f"make verify EXP={Path(folder).name} checks what it pulled")
if left_out:
    print(f"verify: {len(left_out)} file(s) under {root} were left out on purpose by make "
          f"pull-experiment (pulled: {', '.join(parts)}); make pull downloads them")
if uncached:
    print(f"verify: {uncached} tracked file(s) under {root} have no copy in the local DVC cache (dvc fetch downloads them)")
if damaged:
    print("verify: these DVC cache objects do not match their hashes (restore each as shown):")
    print("\n".join(damaged))
if bad:
    print("verify: these files differ from what dvc.lock records:")
    for state, path in bad:
        print(f"  {state}: {path}")
    restorable = [path for state, path in bad if state != "added" and checked.get(recorded.get(path))]
    if restorable:
        print("verify: to restore the recorded version of a file (its cache copy was verified above):")
        for path in restorable[:20]:
            print(f"  dvc checkout --force {path}")
        if len(restorable) > 20:
            print(f"  ... and {len(restorable) - 20} more")
    if any(state == "added" for state, _ in bad):
        print("verify: an added file is a result dvc.lock does not record yet: make push records it")
invalid = 0
for store in stores:
    try:
        notes = validate_any(store)
        print(f"OK: {store}" + (" (not fully verified)" if notes else ""))
        for note in notes:
            print(f"  note: {note}")
    except StoreError as exc:
        invalid += 1
        print(f"INVALID: {exc}")
if bad or invalid or damaged or missing or absent or unlisted:
    sys.exit(f"verify: FAILED ({len(missing)} missing output(s), {len(absent)} missing file(s), "
             f"{len(bad)} changed file(s), {len(damaged)} damaged cache object(s), "
             f"{invalid} invalid store(s)"
             + (f", {len(unlisted)} output(s) without a file listing)" if unlisted else ")"))
print(f"verify: {len(stores)} store(s) OK, {len(checked)} cache object(s) match their hashes")
endef
export DVC_VERIFY

dvc-remote:
	@test -n "$(DVC_REMOTE)" || { echo "usage: make dvc-remote DVC_REMOTE=/path/or/url"; exit 2; }
	$(dvc_use_remote)

record: $(DVC_STAMP)
	@test -d .dvc || { echo "record: no DVC repository here (.dvc): nothing recorded"; exit 0; }; \
	out=$$($(DVC_SNAKEMAKE) --dry-run 2>&1) || { printf '%s\n' "$$out"; exit 1; }; \
	case "$$out" in *"Nothing to be done"*) ;; *) \
	  echo "record: Snakemake has jobs left to run (snakemake -n lists them): dvc.lock left as it was"; \
	  exit 0;; esac; \
	$(DVC_PY) -c "$$DVC_RECORD"

push: $(DVC_STAMP)
	@out=$$($(DVC_SNAKEMAKE) --dry-run 2>&1) || { printf '%s\n' "$$out"; exit 1; }; \
	case "$$out" in *"Nothing to be done"*) ;; *) printf '%s\n' "$$out"; \
	  echo "push: Snakemake has jobs left to run (above): finish the workflow first, so that"; \
	  echo "      dvc.lock records results that match config.yaml"; exit 1;; esac
	@# the report travels with the results (dvc.yaml's report stage): built from them now
	@$(DVC_SNAKEMAKE) --report $(DVC_RESULTS)/report.html > /dev/null 2>&1 || \
	  $(DVC_SNAKEMAKE) --report $(DVC_RESULTS)/report.html
	@DVC_REMOTE='$(DVC_REMOTE)' $(DVC_PY) -c "$$DVC_PUSH"
	@if test -n "$$(git status --porcelain -- dvc.lock 2>/dev/null)"; then \
	  echo "dvc.lock changed: git add dvc.lock && git commit, so that clones pull these results"; fi

# a summary, not a line per file: what DVC restored, then whether Snakemake has work left
pull: $(DVC_STAMP)
	@DVC_REMOTE='$(DVC_REMOTE)' $(DVC_PY) -c "$$DVC_PULL"
	@out=$$($(DVC_SNAKEMAKE) --dry-run 2>&1) || { printf '%s\n' "$$out"; exit 1; }; \
	printf '%s\n' "$$out" | grep '^symbnn:' || true; \
	case "$$out" in *"Nothing to be done"*) echo "pull: snakemake -n has nothing to do";; \
	  *) echo "pull: Snakemake would still run $$(printf '%s\n' "$$out" | sed -n 's/^total *//p') job(s): snakemake -n lists them";; esac

pull-experiment: $(DVC_STAMP)
	@test -n "$(EXP)" || { echo "usage: make pull-experiment EXP=NAME [CHECKPOINTS='posterior ...']"; exit 2; }
	@$(DVC_PY) -c "$$DVC_EXPERIMENT_GUARD" '$(EXP)'
	@# with the experiment's logs and benchmarks (small): `make adopt` would otherwise write
	@# empty logs in their place, which DVC then sees as changed results
	$(DVC_CALL) pull $(PULLED_PARTS)
	@# what make verify EXP=NAME then lets be absent: the rest of the experiment's folder
	@$(DVC_PY) -c 'import sys; from symbnn.pulled import record_partial_pull; record_partial_pull(sys.argv[1], sys.argv[2:])' \
	  $(DVC_RESULTS)/$(EXP) $(PULLED_PARTS)
	$(dvc_adopt)

adopt: $(DVC_STAMP)
	$(dvc_adopt)

verify: $(DVC_STAMP)
	@$(DVC_PY) -c "$$DVC_VERIFY" $(DVC_RESULTS)$(if $(EXP),/$(EXP))

upgrade-stores: $(DVC_STAMP)
	@$(DVC_PY) -m symbnn.cli store upgrade $(DVC_RESULTS)
