"""Where quality is lost: loss decomposition, depth curve, query types and views, the diagnosis.

May import: evaluation, measures and the root modules; no model code.
"""
