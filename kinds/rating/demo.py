"""The rating kind's demo: the closed study `published-sample` (`StudyKind.demo_closed`, `manage.py seed_demo`)."""

from pathlib import Path

from studies.models import Study

from .importer import ratings_import

PUBLISHED_SLUG = "published-sample"
# The published ratings of 30 of the seed study's batches (studies/demo/SOURCE.md).
PUBLISHED_RATINGS = Path(__file__).resolve().parent / "published_ratings.csv"


def published_demo_ensure() -> Study:
    """The published ratings of 30 of the seed study's batches, as a closed study the analysis can open."""
    study = Study.objects.filter(slug=PUBLISHED_SLUG).first()
    if study is None:
        study = ratings_import(
            study_slug=PUBLISHED_SLUG,
            data=PUBLISHED_RATINGS.read_bytes(),
            title="Published ratings: a sample of Welivita & Pu (2024)",
        ).study
    return study
