"""The reranking stage: backends (one table), torch and ONNX models, the rerank job.

May import: jobs and the root modules; never retrieval.
"""
