"""The harness that runs the documentation: blocks, their fates, and what they printed.

Every fenced code block of README.md and docs/*.md either runs or says why it cannot:

- a ``python`` block runs in a subprocess of this interpreter, a ``sh`` block in one bash
  session per page (variables set by one block are seen by the next), both in a scratch
  folder holding ``.venv`` (this venv) and ``gmem-data``, the store of a real ``gmem serve``
  the harness starts for the page on a free port (``127.0.0.1:8080`` in a block becomes
  that port). The session has ``GMEM`` and ``GMEM_URL`` (the server's URL), ``KEY`` and
  ``GMEM_API_KEY`` (a trusted key with memory:write, memory:read, subject:forget and
  audit:read), ``REVIEWER_KEY`` (memory:review) and this venv's ``bin`` first on PATH; no
  other ``GMEM_*`` variable. A block must exit 0, unless a ``<!-- doc: exit N -->`` marker
  just above it says which status it shows.
- a ``json`` or ``text`` block right after a run block of the same section is what that
  block prints, and is compared with it (stdout; stderr for a block marked ``exit N``);
- ``<!-- doc: serves -->`` above a ``sh`` block: the block is the page's server; it is
  started in the background, waited for, and stopped (SIGTERM) when the page ends;
- ``<!-- doc: not-run — why -->`` above any block: not run, for the reason given (at
  least three words);
- any other block fails the suite, so a new example cannot slip in untested.

The comparison rules are those of :mod:`tests.docs.compare`.
"""
