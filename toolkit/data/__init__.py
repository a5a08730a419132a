"""Typed structures and their file formats: runs, qrels, topics, candidates, corpora, sidecars, the catalog of
named collections. Parsed and validated once (through ``toolkit.guard``'s readers); everything downstream reads
these structures and never the files again.
"""
