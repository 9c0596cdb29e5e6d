"""Presenting results: one versioned model per result (``ReportData`` for a run, sweep or
simulation; ``CompareData`` for a comparison) and peer outputs that render it — terminal
(``terminal``), JSON and self-contained HTML (``outputs``, ``html``, ``compare_view``)."""
