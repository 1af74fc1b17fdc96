"""Quality gates: Great Expectations suites per layer, run on Spark, and the report.

``definitions`` reads the committed suites and checkpoints (``expectations/``),
``frames`` builds the DataFrames they guard, ``gx_context`` runs them in a file-backed GX
context under ``<lake>/reports/gx``, ``gates`` turns the results into a pass/fail per
layer, and ``report`` writes the run summary page next to GX's Data Docs.
"""
