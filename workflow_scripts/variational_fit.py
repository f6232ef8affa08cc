"""Rule variational_fit: one mean-field VI posterior of the experiment's model and data, by
Bayes by backprop from the seed's initialisation; its means and standard deviations saved for
the variational barriers."""

import torch

from symbnn.alignment.pairs import fit_variational, save_fit
from symbnn.jobenv import environment
from symbnn.methods.sampling import job_problem
from symbnn.runlog import log_to
from symbnn.settings import Bnn

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    env = environment(snakemake)
    training, fit = snakemake.params.training, snakemake.params.fit
    problem = job_problem(training, env, fit["min_accuracy"], fit["retries"])
    seed = int(snakemake.wildcards.seed)
    fitted = fit_variational(problem, seed, Bnn.parse(fit["bnn"], "alignment.variational.bnn"))
    save_fit(fitted, snakemake.output.fit)
    print(
        f"seed {seed}: trained from seed {fitted['train_seed']}, "
        f"test accuracy at the means {fitted['test_accuracy']:.4f}"
    )
