"""The rating kind's analysis tests share the analysis suite's studies, analysts and fresh cache."""

from tests.analysis.conftest import (  # noqa: F401 (fixtures)
    _fresh_analysis_cache,
    analyst,
    analyst_client,
    hostile_study,
    rated_study,
)
