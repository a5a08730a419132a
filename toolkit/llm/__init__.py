"""LLM access shared by the judges and the listwise reranker: chat backends, answer cache, prompt templates.

The backends are an OpenAI-compatible endpoint (through ``toolkit.guard.client``) and a local causal LM; the
cache is content-addressed. Sits on the foundation (guard, data, models): it knows nothing of judging, reranking
or measures.
"""
