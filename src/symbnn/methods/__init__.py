"""Posterior approximations (SPEC section 4): each turns trained modes into weight samples."""
