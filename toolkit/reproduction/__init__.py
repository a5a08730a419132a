"""Published tables as specs, and the runner that reproduces them.

May import: evaluation, measures and the root modules; no model code.
"""
