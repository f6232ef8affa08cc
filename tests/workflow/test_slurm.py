"""`snakemake --profile profiles/slurm`: the jobs the full-reproduction configs plan, the GPU
request in the sbatch command, and the tiny workflow through a real single-node Slurm."""

import math
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import polars as pl
import pytest
import yaml
from conftest import SNAKEMAKE as WITHOUT_PROFILE
from conftest import plan_in_process, repo_config, stop_process, tiny_experiment

from symbnn.store import open_store

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "slurm"
SNAKEMAKE = [*WITHOUT_PROFILE, "--profile", str(PROFILE)]
FULL = ("mnist-optunet", "cifar100-resnet18", "tinyimagenet-resnet18")


def job_stats(output):
    """{rule: count} from Snakemake's "Job stats" table."""
    table = output.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    counts = {}
    for line in table.splitlines()[3:]:
        name, count = line.split()
        counts[name] = int(count)
    return counts


def expected_jobs(experiment):
    """Jobs of the rules whose number follows from the config: one training job per shard
    of the target and of the pool; per method one fit job per mode, shared by its single- and
    multi-mode variants (Deep Ensembles: one job); per (method, variant) one draw,
    prediction, canonical form and MMD."""
    posterior, methods = experiment["posterior"], experiment["methods"]
    trained = [m for m in ("dropout", "bnn", "sghmc", "swag", "laplace") if m in methods]
    pairs = 2 * len(trained) + ("de" in methods)
    counts = {
        "train_shard": math.ceil(posterior["n_samples"] / posterior["shard_size"]),
        "train_pool_shard": math.ceil(
            methods["pool"] / min(methods["pool"], posterior["shard_size"])
        ),
        "fit": len(trained) * methods["modes"] + ("de" in methods),
    }
    for rule in (
        "gather_posterior",
        "canonicalize",
        "minmass",
        "minmass_report",
        "mmd_deep_ensembles",
        "gather_pool",
        "convergence",
        "pool_convergence",
    ):
        counts[rule] = 1
    for rule in ("sample", "predict", "canonicalize_samples", "mmd_method"):
        counts[rule] = pairs
    return counts


@pytest.mark.slow
def test_dry_run_plans_every_job_of_the_full_reproduction(tmp_path):
    """No dataset is on disk: planning needs the config only."""
    config = repo_config()
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    for name in FULL:
        experiment = config["experiments"][name]
        assert experiment["posterior"]["n_samples"] == 1000
        assert experiment["methods"]["n_samples"] == 100 and experiment["methods"]["modes"] == 10
    result = plan_in_process(
        tmp_path, "--profile", PROFILE, "--dry-run", "--config", f"run={list(FULL)}"
    )
    planned = job_stats(result.stdout)
    expected = {}
    for name in FULL:
        for rule, count in expected_jobs(config["experiments"][name]).items():
            expected[rule] = expected.get(rule, 0) + count
    assert {rule: planned.get(rule, 0) for rule in expected} == expected
    # mnist: 4 shards of 250 OptuNets, 1 pool shard; ResNets: 1000 + 110 one-network jobs
    assert (
        expected["train_shard"] == 4 + 1000 + 1000 and expected["train_pool_shard"] == 1 + 110 + 110
    )
    # one fit job per mode (10) of each trained method, one for Deep Ensembles; the
    # tiny-ImageNet setting has no variational BNN (the paper could not train one)
    assert expected["fit"] == (5 * 10 + 1) + (5 * 10 + 1) + (4 * 10 + 1)
    assert planned["total"] == sum(count for rule, count in planned.items() if rule != "total")
    assert not (tmp_path / "results").exists()
    # every job's line says where it goes: config.yaml's GPU partition for the training of a
    # GPU experiment, the profile's default partition for a small rule
    lines = result.stdout.splitlines()
    train = next(line for line in lines if "shard 000 of cifar100-resnet18 [" in line)
    assert train.endswith("GPUs: 1, partition gpu]"), train
    gather = next(line for line in lines if "Gathering the cifar100-resnet18 shards" in line)
    assert gather.endswith("no GPU, partition cpu]"), gather


FAKE_SBATCH = """#!/bin/sh
# records its arguments, one call per line, and refuses the job
printf '%s\\n' "$*" >> "{record}"
echo "sbatch: error: refused by the test's fake sbatch" >&2
exit 1
"""


@pytest.mark.slow
def test_gpu_rules_carry_the_gpu_request_in_sbatch(tmp_path):
    """The plugin's real sbatch call, caught by a fake `sbatch` on PATH."""
    experiment = tiny_experiment(n_samples=4)
    experiment["model"] = {"name": "resnet18", "num_classes": 10, "in_channels": 1}
    experiment["compute"] = {"gpus": 2, "threads": 8, "mem_mb": 16000, "runtime_min": 90}
    experiment["mmd"] = {"de_members": 2}
    config = {
        **repo_config(),
        "run": ["big"],
        "experiments": {"big": experiment},
        "slurm": {"cpu_partition": "small", "gpu_partition": "a100"},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    for store in ("posterior/target.zarr", "canonical/target.zarr"):  # inputs of MMD and min-mass
        (tmp_path / "results" / "big" / store).mkdir(parents=True)
    (tmp_path / "results" / "big" / "posterior" / "converged.parquet").touch()
    # what the checkpoint `accuracies` writes: the planning applies the acceptance rule to it
    pl.DataFrame(
        {
            "row": [0, 1, 2, 3],
            "seed": [0, 1, 2, 3],
            "test_accuracy": [0.9] * 4,
            "flagged": [True] * 4,
            "measured": [True] * 4,
        }
    ).write_parquet(tmp_path / "results" / "big" / "posterior" / "target_accuracies.parquet")
    bin_dir, record = tmp_path / "bin", tmp_path / "sbatch.calls"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(FAKE_SBATCH.format(record=record))
    # the plugin (2.8) looks for an account with sacct even with --slurm-no-account: a
    # cluster without accounting answers with nothing
    (bin_dir / "sacct").write_text("#!/bin/sh\nexit 0\n")
    for tool in ("sbatch", "sacct"):
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    # the shard apart: its training makes target.zarr out of date for the other two (through
    # the gathering, which --allowed-rules does not stop the planning from seeing)
    for rules, targets in (
        (["train_shard"], ["results/big/posterior/shards/000.zarr"]),
        (
            ["mmd_deep_ensembles", "minmass"],
            [
                "results/big/mmd/deep_ensembles/summary.parquet",
                "results/big/minmass/masses.parquet",
            ],
        ),
    ):
        result = subprocess.run(
            [
                *SNAKEMAKE,
                "--directory",
                str(tmp_path),
                "--retries",
                "0",
                "--slurm-no-account",
                "--slurm-init-seconds-before-status-checks",
                "1",
                "--allowed-rules",
                *rules,
                "--",
                *targets,
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert result.returncode != 0  # every submission was refused
    calls = {
        re.search(r"--comment '?rule_(\w+?)_wildcards", line).group(1): line
        for line in record.read_text().splitlines()
    }
    assert set(calls) == {"train_shard", "mmd_deep_ensembles", "minmass"}, result.stderr[-3000:]
    train = calls["train_shard"]
    assert "--gpus=2" in train and "--cpus-per-gpu=4" in train and "-p a100" in train
    assert "--mem 16000" in train and "-t 90" in train
    # ResNet-18 is large: its layer-wise MMD runs on the experiment's GPUs
    mmd = calls["mmd_deep_ensembles"]
    assert "--gpus=2" in mmd and "-p a100" in mmd and "--mem 16000" in mmd
    # min-mass is a small CPU job: no GPU, the profile's default partition
    minmass = calls["minmass"]
    assert "--gpus" not in minmass and "--cpus-per-task=1" in minmass and "-p cpu" in minmass


# ---------------------------------------------------------------------------------------
# A real single-node Slurm (Debian's slurmctld, slurmd, munge) on localhost.

SLURM_CONF_MARK = "# written by symbnn tests/workflow/test_slurm.py"


def run(cmd, **kwargs):
    return subprocess.run(cmd, capture_output=True, text=True, **kwargs)


def wait_for(predicate, seconds, step=0.5):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


class LocalSlurm:
    """Starts munged, slurmctld and slurmd in the foreground (no systemd), remembering the
    PIDs, so that `stop` ends exactly the daemons it started."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.processes = []
        self.written = []
        self.created = []  # folders and files this test created outside workdir, removed by stop
        # more CPUs than this machine has (slurmd takes slurm.conf's word for it): a job can
        # ask for more threads than the submit host's cores, as on a real cluster
        self.cpus = (os.cpu_count() or 1) + 2

    def install(self):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for cmd in (
            ["apt-get", "update", "-qq"],
            [
                "apt-get",
                "install",
                "-y",
                "-qq",
                "--no-install-recommends",
                "slurmctld",
                "slurmd",
                "slurm-client",
                "munge",
            ],
        ):
            result = run(cmd, env=env, timeout=300)
            if result.returncode != 0:
                pytest.skip(
                    f"cannot install Slurm: {' '.join(cmd)} failed: {result.stderr.strip()[-500:]}"
                )

    def start_daemon(self, name, cmd):
        log = open(self.workdir / f"{name}.out", "w")
        self.processes.append(
            (
                name,
                subprocess.Popen(
                    cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                ),
            )
        )

    def write(self, path, text):
        path = Path(path)
        if path.exists() and SLURM_CONF_MARK not in path.read_text():
            pytest.skip(f"{path} exists and is not ours: not touching a configured Slurm")
        path.write_text(text)
        self.written.append(path)

    def start(self):
        munge_key = Path("/etc/munge/munge.key")
        if not munge_key.exists() or munge_key.stat().st_size == 0:
            if not munge_key.exists():
                self.created.append(munge_key)
            run(["mungekey", "--create", f"--keyfile={munge_key}"])
        shutil.chown(munge_key, "munge", "munge")
        munge_key.chmod(0o400)
        self.make_folder("/run/munge", "munge")
        # setpriv execs munged itself, so the PID is munged's
        self.start_daemon(
            "munged",
            [
                "setpriv",
                "--reuid=munge",
                "--regid=munge",
                "--init-groups",
                "/usr/sbin/munged",
                "--foreground",
            ],
        )
        if not wait_for(lambda: run("munge -n | unmunge", shell=True).returncode == 0, 15):
            self.fail("munged did not answer")

        host = socket.gethostname().split(".")[0]
        memory = int(run(["free", "-m"]).stdout.splitlines()[1].split()[1]) - 256
        # the controller's state (its `clustername` file included) and slurmd's spool live in
        # the test's folder: a later Slurm with another cluster name still starts
        # the test's folder (pytest's, mode 700) is out of the slurm user's reach: a folder
        # of its own under /tmp, removed by stop
        state = Path(tempfile.mkdtemp(prefix="symbnn-slurmctld-"))
        self.created.append(state)
        shutil.chown(state, "slurm", "slurm")
        spool = self.workdir / "slurmd"  # slurmd runs as root
        spool.mkdir()
        # no slurmdbd: accounting off, so the profile's squeue status command is the one that
        # works; MinJobAge keeps finished jobs visible to `squeue -t all` for the assertions
        self.write(
            "/etc/slurm/slurm.conf",
            f"""{SLURM_CONF_MARK}
ClusterName=symbnnci
SlurmctldHost={host}(127.0.0.1)
SlurmUser=slurm
AuthType=auth/munge
MailProg=/bin/true
StateSaveLocation={state}
SlurmdSpoolDir={spool}
SlurmdParameters=config_overrides
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile={self.workdir}/slurmctld.log
SlurmdLogFile={self.workdir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MinJobAge=600
GresTypes=gpu
NodeName={host} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={memory} Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes={host} Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes={host} Default=NO MaxTime=INFINITE State=UP
""",
        )
        # a fake GPU: File= is required, /dev/null stands in for /dev/nvidia0
        self.write(
            "/etc/slurm/gres.conf", f"{SLURM_CONF_MARK}\nNodeName={host} Name=gpu File=/dev/null\n"
        )
        self.start_daemon("slurmctld", ["/usr/sbin/slurmctld", "-D", "-c"])
        self.start_daemon("slurmd", ["/usr/sbin/slurmd", "-D"])

        def idle():
            return run(["sinfo", "-h", "-n", host, "-o", "%t"]).stdout.split() == ["idle"]

        if not wait_for(idle, 60):
            self.fail(f"node not idle: {run(['sinfo', '-N', '-l']).stdout}")

    def make_folder(self, path, owner):
        path = Path(path)
        if not path.exists():
            path.mkdir(parents=True)
            self.created.append(path)
        shutil.chown(path, owner, owner)

    def fail(self, reason):
        logs = "\n".join(
            f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted(self.workdir.glob("*.out"))
        )
        self.stop()
        pytest.skip(f"Slurm daemons did not start: {reason}\n{logs}")

    def stop(self):
        for _name, process in reversed(self.processes):  # newest first, each by its own PID
            if process.poll() is None:
                stop_process(process, 20)
        self.processes = []
        for path in self.written:
            path.unlink(missing_ok=True)
        self.written = []
        for path in reversed(self.created):
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
        self.created = []


@pytest.fixture
def local_slurm(tmp_path_factory):
    if os.environ.get("CI") != "true" and os.environ.get("SYMBNN_SLURM_TEST") != "1":
        pytest.skip(
            "installs Debian's Slurm and starts its daemons: runs when CI=true or SYMBNN_SLURM_TEST=1"
        )
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip("needs root and apt-get to install Slurm")
    if shutil.which("scontrol") and run(["scontrol", "ping"]).returncode == 0:
        pytest.skip("a Slurm controller is already running here: not starting a second one")
    slurm = LocalSlurm(tmp_path_factory.mktemp("slurm"))
    slurm.install()
    try:
        slurm.start()
        yield slurm
    finally:
        slurm.stop()


def scheduler_records():
    """{job id: fields} from the controller's own records: `squeue -t all` (finished jobs stay
    listed for MinJobAge) for state, partition and the plugin's comment (rule_<name>_...), and
    `scontrol show job` for the GPUs each job was given."""
    records = {}
    for line in run(["squeue", "-t", "all", "-h", "-o", "%i|%P|%T|%k"]).stdout.splitlines():
        job_id, partition, state, comment = line.split("|")
        records[job_id] = {"partition": partition, "state": state, "comment": comment}
    for line in run(["scontrol", "-o", "show", "job"]).stdout.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if fields.get("JobId") in records:
            records[fields["JobId"]]["tres"] = fields.get("TresPerJob", "")
            records[fields["JobId"]]["cpus"] = int(fields.get("NumCPUs", "0"))
    return records


@pytest.mark.slow
def test_tiny_workflow_runs_through_a_real_slurm(local_slurm, tmp_path):
    # one shard of 4 networks, then the gathered store: two jobs in a chain (30-50 s each on
    # 2 cores, most of it Python start-up inside the job, plus the plugin's status polling)
    experiment = tiny_experiment(n_samples=4, shard_size=4)
    # the training job asks for one GPU: the node's fake one, so it goes to the gpu partition
    # with --gpus=1 and trains on the CPU after the logged fallback
    # with more threads than this (submit) host has cores: the job must get them all
    threads = (os.cpu_count() or 1) + 1
    assert threads <= local_slurm.cpus
    experiment["compute"] = {"gpus": 1, "threads": threads, "mem_mb": 1000, "runtime_min": 10}
    config = {**repo_config(), "run": ["tiny"], "experiments": {"tiny": experiment}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    targets = ["results/tiny/posterior/target.zarr"]
    started = time.time()
    # SIGINT on timeout: Snakemake then cancels its Slurm jobs before exiting
    result = run(
        [
            "timeout",
            "-s",
            "INT",
            "240",
            *SNAKEMAKE,
            "--directory",
            str(tmp_path),
            "--jobs",
            "4",
            "--slurm-init-seconds-before-status-checks",
            "2",
            "--latency-wait",
            "5",
            *targets,
        ],
        timeout=270,
    )
    print(f"workflow through Slurm: {time.time() - started:.0f} s")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    results = tmp_path / "results" / "tiny"
    assert open_store(results / "posterior" / "target.zarr").n_samples == 4
    # every job went through sbatch and completed, GPU job on the gpu partition with its GPU
    records = scheduler_records()
    rules = sorted(
        re.match(r"rule_(\w+?)(_wildcards|$)", r["comment"]).group(1) for r in records.values()
    )
    assert rules == ["gather_posterior", "train_shard"], records
    for record in records.values():
        assert record["state"] == "COMPLETED", record
        gpu = record["comment"].startswith("rule_train_shard")
        assert record["partition"] == ("gpu" if gpu else "cpu"), record
        assert ("gpu" in record["tres"]) == gpu, record
        assert record["cpus"] == (threads if gpu else 1), record
    # the plugin's per-job logs, named by the scheduler's job ids
    logs = list((tmp_path / ".snakemake" / "slurm_logs").rglob("*.log"))
    assert {log.stem for log in logs} == set(records)
    assert (
        len(list((tmp_path / ".snakemake" / "slurm_logs" / "rule_train_shard").rglob("*.log"))) == 1
    )
    # the training job saw no usable GPU and said so in its own log
    log = (results / "logs" / "train_shard" / "000.log").read_text()
    assert "no CUDA device is visible, running on the CPU" in log
    # the job's own Snakemake is not capped at the submit host's cores either (the profile's
    # `cores` bound, not `cores: all` resolved here, reaches the job's command line)
    job_log = next((tmp_path / ".snakemake" / "slurm_logs" / "rule_train_shard").rglob("*.log"))
    cores = re.search(r"--target-jobs train_shard\S* .*?--cores (\S+)", job_log.read_text())
    assert cores and (cores.group(1) == "all" or int(cores.group(1)) >= threads), cores
