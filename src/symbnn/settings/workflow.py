"""The whole configuration: experiments, which of them a run builds, where results go and the
environment a run needs (data folder, downloads, device), which never changes a result."""

from __future__ import annotations

import dataclasses
import os
import re

from symbnn.settings.analyses import Analyses
from symbnn.settings.base import ConfigError, Problems, Section, setting
from symbnn.settings.checkpoints import RELEASES
from symbnn.settings.hmc import Reference
from symbnn.settings.methods import Bnn, Methods
from symbnn.settings.stages import Alignment, Collapse, Metrics, Mmd, SymmetryRemoval
from symbnn.settings.training import Compute, Data, Model, Posterior, Recipe

# an experiment name (also the workflow's `experiment` wildcard)
EXPERIMENT_NAME = r"[A-Za-z0-9][A-Za-z0-9-]*"
NAME_PATTERN = re.compile(rf"^{EXPERIMENT_NAME}$")
# folders under `results` that are not experiments
RESERVED_NAMES = ("analyses",)


@dataclasses.dataclass(frozen=True)
class Experiment(Section):
    DOC = "one posterior study: data, model, recipe, target posterior and what is computed on it"
    data: Data = setting(doc="datasets")
    model: Model = setting(doc="the network; `name` picks which, the other keys are its options")
    recipe: Recipe = setting(doc="training recipe")
    posterior: Posterior = setting(doc="the target posterior")
    description: str = setting("", "one line for the report")
    compute: Compute = setting(Compute(), "resources of training, sampling and prediction jobs")
    symmetry: SymmetryRemoval = setting(SymmetryRemoval(), "symmetry removal and min-mass")
    mmd: Mmd = setting(Mmd(), "layer-wise MMD")
    methods: Methods | None = setting(None, "posterior approximations (none: no method runs)")
    metrics: Metrics = setting(Metrics(), "uncertainty metrics")
    collapse: Collapse = setting(Collapse(), "functional collapse")
    alignment: Alignment = setting(Alignment(), "alignment and loss barriers")
    reference: Reference | None = setting(
        None,
        "the full-batch HMC reference posterior (none: no reference; `make run-hmc` builds "
        "it, and every run when it is enabled)",
    )

    def check(self, where: str) -> None:
        problems = Problems()
        members = self.mmd.de_members
        if members is not None and members > self.posterior.n_samples - 2:
            problems.add(
                f"{where}.mmd.de_members: {members} must leave at least 2 of the "
                f"{self.posterior.n_samples} target networks"
            )
        if self.posterior.source == "checkpoints":
            with problems.collect():
                self._check_released_model(where)
        elif self.methods is not None:
            pool, target = self.methods.pool_seeds, self.posterior.seeds
            if pool.start < target.stop and target.start < pool.stop:
                problems.add(
                    f"{where}.methods.first_seed: the pool's seeds {pool.start}..{pool.stop - 1} "
                    f"overlap the target posterior's {target.start}..{target.stop - 1}"
                )
        with problems.collect():
            self._check_reference(where)
        # the variational trainings' recipes are the experiment's with their changes: each
        # must be a valid recipe (e.g. milestones within changed epochs)
        for key, bnn in self._variational_fits():
            with problems.collect():
                bnn.recipe.apply(self.recipe, f"{where}.{key}.recipe")
        problems.raise_any()

    def _check_reference(self, where: str) -> None:
        """Chains started at the pool's modes need a pool that holds them (a reference
        built only on request is checked when it is asked for: `symbnn.reference.plan`)."""
        reference = self.reference
        if reference is None or reference.start != "pool":
            return
        if self.methods is None and reference.enabled:
            raise ConfigError(
                f"{where}.reference.start: pool starts the chains at the methods' pool, but the "
                "experiment has no methods section (add one, or set start: prior)"
            )
        if self.methods is not None and reference.modes > self.methods.pool:
            raise ConfigError(
                f"{where}.reference.modes: {reference.modes} exceeds methods.pool "
                f"({self.methods.pool})"
            )

    def _variational_fits(self) -> list[tuple[str, Bnn]]:
        """(config path, settings) of each variational fit the experiment trains."""
        fits = []
        if self.methods is not None and self.methods.bnn is not None:
            fits.append(("methods.bnn", self.methods.bnn))
        if self.alignment.variational is not None:
            fits.append(("alignment.variational.bnn", self.alignment.variational.bnn))
        return fits

    def _check_released_model(self, where: str) -> None:
        """The model must be the released networks' architecture (the stem of a ResNet-18
        aside: the files tell it)."""
        released = RELEASES[self.posterior.checkpoints.setting].architecture
        model = self.model.to_dict()
        differing = [
            key
            for key in sorted({*released, *model} - {"stem"})
            if model.get(key) != released.get(key)
        ]
        if differing:
            raise ConfigError(
                f"{where}.model: the released {self.posterior.checkpoints.setting} networks are "
                f"{released}, not {model} (differing: {', '.join(differing)})"
            )


@dataclasses.dataclass(frozen=True)
class Slurm(Section):
    DOC = "partitions the Slurm profile sends CPU and GPU jobs to"
    cpu_partition: str = setting("cpu", "partition of CPU jobs")
    gpu_partition: str = setting("gpu", "partition of GPU jobs")


@dataclasses.dataclass(frozen=True)
class Config(Section):
    DOC = "symbnn's workflow configuration: the experiments and which of them a run builds"
    run: tuple[str, ...] = setting(
        doc="names of the experiments (keys of `experiments`) this run builds",
        min_items=1,
        unique=True,
    )
    experiments: dict[str, Experiment] = setting(doc="the experiments symbnn can run, by name")
    results: str = setting(
        "results", "folder (relative to the working directory) that receives every output"
    )
    # the environment of a run: read by jobs, never a rerun trigger
    data_root: str = setting(
        "data", "folder holding the real datasets (downloaded there when `download` is true)"
    )
    download: bool = setting(
        False, "let the real dataset loaders download missing files (needs internet)"
    )
    device: str = setting(
        "auto",
        "auto, cpu, cuda or cuda:N: where jobs compute (auto: CUDA when a GPU is visible, else the CPU)",
        pattern=r"auto|cpu|cuda(:\d+)?",
    )
    slurm: Slurm = setting(Slurm(), "Slurm partitions")
    analyses: Analyses = setting(Analyses(), "the paper's further analyses")

    def check(self, where: str) -> None:
        prefix = f"{where}." if where else ""
        problems = Problems()
        if not self.experiments:
            problems.add(f"{prefix}experiments: define at least one experiment")
        for name in self.experiments:
            if not NAME_PATTERN.match(name):
                problems.add(f"{prefix}experiments.{name}: names use letters, digits and '-' only")
            if name in RESERVED_NAMES:
                problems.add(
                    f"{prefix}experiments.{name}: the name is taken by the folder {self.results}/{name}; "
                    "rename the experiment"
                )
        for index, name in enumerate(self.run):
            if name not in self.experiments:
                problems.add(
                    f"{prefix}run[{index}]: experiment {name!r} is not defined under experiments "
                    f"(defined: {', '.join(self.experiments)})"
                )
        with problems.collect():
            check_results_folder(self.results, f"{prefix}results")
        problems.raise_any()
        with problems.collect():
            self._check_permutation_frequency(prefix)
        problems.raise_any()

    def _check_permutation_frequency(self, prefix: str) -> None:
        """The analysis's epochs and milestones must make a valid recipe with the recipe of
        each experiment it runs on."""
        settings = self.analyses.permutation_frequency
        where = f"{prefix}analyses.permutation_frequency"
        for name in self.analyses.permutation_frequency_experiments(self.run, self.experiments):
            try:
                settings.recipe_for(self.experiments[name].recipe, where)
            except ConfigError as exc:
                raise ConfigError(f"{exc} (with experiment {name}'s recipe)") from None


def check_results_folder(results: str, where: str) -> None:
    """``results`` must name a folder that can hold the outputs: not empty, and not a
    filesystem root (`/`), where the experiments' folders would land."""
    if not results.strip():
        raise ConfigError(f"{where}: empty; name the folder that receives the outputs")
    folder = os.path.abspath(results)
    if os.path.dirname(folder) == folder:
        raise ConfigError(
            f"{where}: {results!r} is the filesystem root {folder}; name a folder of its own "
            "(e.g. results)"
        )
