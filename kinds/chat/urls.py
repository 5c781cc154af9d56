"""The chat kind's analysis pages (`StudyKind.analysis_urls`), served under analysis/urls.py's names."""

from django.urls import path

from config.lazy_views import LazyViews

# Imported on their first request (config/lazy_views.py): they load pandas, SciPy and matplotlib.
views = LazyViews("kinds.chat.views")

urlpatterns = [
    path("<slug:slug>/chat/", views.chat_page, name="chat"),
    path("<slug:slug>/chat/report.html", views.chat_report, name="chat_report"),
]
