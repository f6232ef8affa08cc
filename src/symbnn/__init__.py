"""symbnn: symmetry-aware exploration of Bayesian neural network posteriors."""

import os

# OpenBLAS worker threads (scipy's BLAS: the Gram syrk of the MMD distances) busy-wait for
# 2^28 cycles (~0.1 s) after every call by default. On a machine with few cores they take a
# core from the numba kernels that run next: the MMD kernels took 17 ms after a syrk instead
# of 9 ms. Read when scipy's OpenBLAS loads, so it is set here, before any symbnn module
# imports scipy; an explicit setting wins.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

__version__ = "0.1.0"
