"""Runs + qrels -> per-query tables: the evaluator, its checks and groups, trec_eval's output, sensitivity.

Measuring only: provenance, input checks, evaluation groups, trec_eval's output format, differences from
trec_eval and gain sensitivity. The statistics are ``toolkit.stats``, the quality of the judgments
``toolkit.quality``.
"""
