"""The public verbs and their result classes (re-exported by ``toolkit``): the layer between the results
packages (evaluation, diagnosis, retrieval, reranking, report) and the CLI, which calls it."""
