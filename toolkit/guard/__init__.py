"""The doors: every input, output, spec, cache entry and remote call passes one guarded place here.

| door | module | what it guarantees |
|---|---|---|
| outputs | ``writer`` | a result folder replaces only what twostage wrote (its manifest), whole or not at all |
| escaping | ``escape`` | every id, text and name escaped for the format it lands in, terminals included |
| disk | ``preflight`` | free space and writability checked before long work |
| inputs | ``readers`` | one opening function (regular files or stdin, stopped at a NUL byte) and one validator of ids, texts, labels, JSON nesting and compressed sizes for every reader |
| numbers | ``numbers`` | one parser per kind of number from outside: ASCII digits, bounded, refusals that never convert |
| specs | ``specs`` | one YAML loader: safe, bounded in aliases, expansion, depth and size; string keys, known tags |
| caches | ``store`` | one cache store: entries verified against key and checksum, damaged ones set aside, foreign ones not read |
| remote calls | ``client`` | one HTTP client (httpx), downloads included: credentials kept on their origin, bounded answers, a deadline per request, loopback decided on the address the connection uses |
| patterns | ``patterns`` | every regular expression from outside compiled on RE2 (linear time), or refused |

The table of hostile inputs every door must pass is ``tests/guard/``; ``docs/security.md`` states what each
door guarantees. Modules here import only ``toolkit.errors``, ``toolkit.notices`` and each other (and, lazily,
``toolkit.data`` for file checksums).
"""

#: The doors the table of hostile inputs (``tests/guard/``) must cover, one ``cases_<door>.py`` each.
DOORS = ("writer", "readers", "specs", "store", "client", "numbers", "escape", "patterns")
