"""Retrieval quality (SPEC §12): LoCoMo recall@k of the product and of same-run baselines.

``python -m bench.quality [DATA_DIR]`` (``make bench-quality``). Modules: ``locomo`` reads
the conversations and mends evidence ids, ``systems`` runs the baselines, the prototype
and the product, ``lexical`` is the offline BM25 the prototype ranks with, ``semantic`` the
optional hybrid, ``measure`` turns rankings into recall@k and hit@k, ``report`` writes the
JSON and the Markdown.
"""
