"""Corpus and published-ratings import: validate the whole file first, then write it in one transaction.

`parse` reads and checks a corpus file (nothing written), `corpus` writes a parsed corpus into a draft study.
A kind's own importers are in its package (the published ratings: kinds/rating/importer.py). When a file has any problem, every problem
is reported with its row and column and nothing at all is written.
"""

from .corpus import corpus_import
from .parse import CorpusImportError, ImportProblem, ImportResult, corpus_parse, corpus_sample

__all__ = [
    "CorpusImportError",
    "ImportProblem",
    "ImportResult",
    "corpus_import",
    "corpus_parse",
    "corpus_sample",
]
