"""LLM relevance judges: prompt templates and the job that labels a run's top documents.

On the chat backends and answer cache of ``toolkit.llm``. The calibration against human labels
(``calibration``) compares on ``toolkit.quality.agreement``; ``toolkit.api.judging`` reads the inputs, runs the
judge and hands the calibration the evaluation of the runs it ranks.
"""
