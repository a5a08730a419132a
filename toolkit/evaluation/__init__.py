"""Runs + qrels -> per-query tables: the evaluator, provenance, trec_eval's output format, significance, agreement, gain sensitivity.

May import: measures and the root modules.
"""
