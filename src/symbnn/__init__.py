"""symbnn: symmetry-aware exploration of Bayesian neural network posteriors."""

__version__ = "0.1.0"
