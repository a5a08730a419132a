"""LLM relevance judges: prompt templates and the job that labels a run's top documents.

On the chat backends and answer cache of ``toolkit.llm``. The calibration against human labels lives in
``toolkit.api.judging``, which combines this package with ``toolkit.quality.assessor_agreement``.
"""
