"""Corpus and published-ratings import: validate the whole file first, then write it in one transaction.

`parse` reads and checks a corpus file (nothing written), `corpus` writes a parsed corpus into a draft study,
`ratings` imports a published study's ratings as a closed study. When a file has any problem, every problem
is reported with its row and column and nothing at all is written.
"""

from .corpus import corpus_import
from .parse import CorpusImportError, ImportProblem, ImportResult, corpus_parse, corpus_sample
from .ratings import RatingsImportResult, ratings_import, teq_score

__all__ = [
    "CorpusImportError",
    "ImportProblem",
    "ImportResult",
    "RatingsImportResult",
    "corpus_import",
    "corpus_parse",
    "corpus_sample",
    "ratings_import",
    "teq_score",
]
