"""End-to-end experiments: a YAML file of stages and grids, run in one warm process, tuned without leaks.

Through a content-keyed stage cache, tuned without reporting the score a configuration was chosen on
(``spec``, ``stage_cache``, ``stages``, ``tuning``, ``results``, ``report``). ``run_experiment(path, out)``
returns the results table.
"""
