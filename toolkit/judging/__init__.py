"""LLM relevance judges: prompt templates, backends (one table), a content-addressed cache, and the job that
labels a run's top documents. Imports only the root modules; the calibration against human labels lives in
``toolkit.api.judging``, which combines this package with ``toolkit.evaluation.assessors``."""
