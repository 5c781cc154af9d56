"""The questionnaire kind's analysis pages (`StudyKind.analysis_urls`), served under analysis/urls.py's names."""

from django.urls import path

from config.lazy_views import LazyViews

# Imported on their first request (config/lazy_views.py): they load pandas and SciPy.
views = LazyViews("kinds.questionnaire.views")

urlpatterns = [
    path("<slug:slug>/emotionbench/", views.emotionbench_dashboard, name="emotionbench"),
    path("<slug:slug>/emotionbench/<str:name>.csv", views.emotionbench_table_csv, name="emotionbench_table"),
    path("<slug:slug>/emotionbench/change.png", views.emotionbench_figure, name="emotionbench_figure"),
]
