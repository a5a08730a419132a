"""Every report's rendering lives here; nothing else in the toolkit writes HTML or Markdown.

- ``html``: shared helpers (inline CSS, escaping, tables, PNG data URIs, number formatting);
- ``eval_tables``: tables of evaluation results and paired significance;
- ``eval_many``: many runs' results as one wide CSV or JSON table (``twostage eval QRELS RUN RUN ...``);
- ``diagnosis_page``: ``twostage diagnose``'s report folder (its sections in ``diagnosis_*``);
- ``compare_page``: ``twostage compare``'s text, JSON and HTML;
- ``reproduction``: ``twostage reproduce``'s Markdown, HTML and JSON.

Modules read the computed results (diagnosis, comparison document, reproduction) and never compute a measure.
"""
