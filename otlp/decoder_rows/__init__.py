"""What every decoder row shares, whichever rule verifies it ([GR] §6 and the exact rules).

A decoder's call (:func:`otlp.verify_drafts`) turns B rows of full-vocabulary (p, q) and each
row's drafted ids into one token per row. The rules differ (global resolution's fused rows in
:mod:`otlp.global_resolution.rows`, the exact rules and partial resolution in
:mod:`otlp.verification.position`); what they share has one home here, below both (of
global resolution it reads only :mod:`otlp.global_resolution.reports`' ``UnitReport``, the
fields every solved unit reports, which :class:`~.result.RowReport` extends):

* :mod:`.inputs` — the call's checked inputs as every path reads them
  (:class:`~.inputs.DecoderBatch`: the arrays, uniforms, scheme, top-k and tolerance), a
  row's Instance, the draw from a local law;
* :mod:`.checks` — one row's scan, top-k and draft checks, and the one message per
  :class:`~otlp.solvers.row_status.RowStatus` code that names the argument and row at fault;
* :mod:`.result` — the result (:class:`DraftVerification`) and a row's report
  (:class:`RowReport`);
* :mod:`.exact` — the exact rules' rows: each token from the rule's exact conditional law
  given the row's drafts.
"""
