"""Sharded, resumable jobs: manifests, the in-process and Ray executors, the embedding cache."""
