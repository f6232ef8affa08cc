"""A gold-standard reference posterior: full-batch Hamiltonian Monte Carlo and its diagnostics
(docs/maths.md, section 4.7).

- `hmc`: the sampler for a batch of independent chains on any batched potential (leapfrog,
  Metropolis correction, step size adapted during burn-in by `adaptation`'s dual averaging);
- `network`: the potential of an experiment's network over its whole training set (the
  batched trainer's passes) and the chains of networks;
- `diagnostics`: split-R-hat, bulk and tail ESS (rank-normalised) and nested R-hat.
"""
