"""Statistics and uncertainty over per-query tables: tests, intervals, power, risk, verdicts and trust.

Significance tests and their corrections, bootstrap intervals, power, URisk/TRisk, paired comparisons of runs,
rank similarity, the one-line verdicts and the trust fields every report shows. Reads the evaluator's tables
(``toolkit.evaluation``) and never the files; the quality of the judgments (holes, pooling, assessors) is
``toolkit.quality``.
"""
