"""The numeric constants and codes that global resolution's kernels and its object API share.

One home for each: the fused per-token kernels (:mod:`.token`) and the engine of
:mod:`otlp.global_resolution` both import them from here.
"""

PSI_TIE = 1e-13  # min psi above -PSI_TIE counts as alpha* = 1 (H* = the empty set)
BUDGET_FACTOR = 5.0  # each system may deviate by 5 tau ([GR] Lemma 6.6: 15 tau, 10 tau overall)

# The two kinds of unit ([GR] §6): an outer-system block (Theorem 6.4) or the inner system
# (Theorem 6.5). Kernels use these integer codes; :class:`otlp.global_resolution.System`
# names them.
OUTER, INNER = 0, 1
# A row of one draft needs no unit: its optimal plan is speculative sampling's law (the
# fused kernels' closed form, :func:`.token.single_draft_slice`).
SINGLE_DRAFT = 2

# A row's status codes (:func:`.token.token_row`, :func:`.token.batch`) are the decoder rows'
# own: :mod:`otlp.solvers.row_status`.
