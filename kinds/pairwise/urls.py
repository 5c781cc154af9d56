"""The pairwise kind's analysis pages (`StudyKind.analysis_urls`), served under analysis/urls.py's names."""

from django.urls import path

from config.lazy_views import LazyViews

# Imported on their first request (config/lazy_views.py): they load pandas and SciPy.
views = LazyViews("kinds.pairwise.views")

urlpatterns = [
    path("<slug:slug>/pairwise/", views.pairwise_page, name="pairwise"),
    path("<slug:slug>/pairwise/<str:name>", views.pairwise_file, name="pairwise_file"),
]
