"""First stage through Pyserini: Lucene and dense indexing, BM25/RM3/QL and dense search, fusion, run sidecars."""
