"""Posterior approximations (docs/maths.md, section 4): each turns trained modes into weight samples."""
