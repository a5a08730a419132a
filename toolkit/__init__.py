"""twostage: Pyserini-integrated two-stage retrieval evaluation.

Importing this package loads no heavy dependency (pyserini, jnius, torch,
faiss, matplotlib); those are imported inside the functions that use them.
"""

__version__ = "0.1.0"
