"""Rules import_target and import_pool: released networks into the target or pool store."""

import torch

from symbnn.checkpoints.experiment import import_posterior
from symbnn.jobenv import environment
from symbnn.runlog import log_to
from symbnn.settings import Data
from symbnn.settings.checkpoints import Checkpoints

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    env = environment(snakemake)
    imported = snakemake.params.imported
    store = import_posterior(
        snakemake.output.store,
        snakemake.wildcards.experiment,
        Checkpoints.parse(imported["checkpoints"], "checkpoints"),
        imported["count"],
        Data.parse(imported["data"], "data"),
        offset=imported["offset"],
        data_root=env.data_root,
        download_data=env.download,
        device="cpu",  # the import rules ask for no GPU (rules/checkpoints.smk)
    )
    print(f"wrote {store}")
