"""First stage through Pyserini: Lucene and dense indexing, BM25/RM3/QL and dense search, fusion.

May import: jobs and the root modules; never reranking.
"""
