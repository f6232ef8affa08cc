"""Alignment modulo permutations (Git Re-Basin's weight matching; Rossi et al. for
variational posteriors) and the loss along linear interpolation paths.

    matching       weight matching by coordinate descent over unit groups (any architecture)
    interpolation  loss/accuracy along (1 - t) A + t B, for networks and mean-field
                   Gaussians, and the loss barrier
    stores         align a whole store; barriers between two stored networks
"""

from symbnn.alignment.matching import Alignment, align_gaussian, align_state, weight_matching

__all__ = ["Alignment", "align_gaussian", "align_state", "weight_matching"]
