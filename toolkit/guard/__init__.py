"""The doors: every input, output, spec, cache entry and remote call passes one guarded place here.

| door | module | what it guarantees |
|---|---|---|
| outputs | ``writer`` | a result folder replaces only what twostage wrote (its manifest), whole or not at all |
| escaping | ``escape`` | every id, text and name escaped for the format it lands in |
| disk | ``preflight`` | free space and writability checked before long work |

The table of hostile inputs every door must pass is ``tests/security/``; ``docs/security.md`` states what each
door guarantees. Modules here import only ``toolkit.errors``, ``toolkit.notices`` and each other (and, lazily,
``toolkit.data`` for file checksums).
"""
