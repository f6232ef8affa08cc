"""The paper's further analyses: the toy posterior of Figure 1 (`toy`), the frequency of
permutations during training of section 5.2 (`permutation_frequency`) and the layer-wise
marginals of appendix D.3 (`marginals`). `stacked_mlp` trains the many small MLPs the toy
and the marginals need, all at once."""
