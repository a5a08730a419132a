"""The reranking stage: backends (one table), torch and ONNX models, the rerank job."""
