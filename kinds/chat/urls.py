"""The chat kind's analysis pages (`StudyKind.analysis_urls`), served under analysis/urls.py's names."""

from django.urls import path

from config.lazy_views import LazyViews

# Imported on their first request (config/lazy_views.py): they load pandas, SciPy and matplotlib.
views = LazyViews("kinds.chat.views")

urlpatterns = [
    path("<slug:slug>/chat/", views.chat_page, name="chat"),
    path("<slug:slug>/chat/report.html", views.chat_report, name="chat_report"),
]

# The human-responder console (kinds/chat/console_views.py): responders, not analysts.
console = LazyViews("kinds.chat.console_views")

urlpatterns += [
    path("<slug:slug>/chat/console/", console.console_page, name="chat_console"),
    path("<slug:slug>/chat/console/status.json", console.console_status, name="chat_console_status"),
    path("<slug:slug>/chat/console/take", console.console_take, name="chat_console_take"),
    path("<slug:slug>/chat/console/reply", console.console_reply, name="chat_console_reply"),
    path("<slug:slug>/chat/console/release", console.console_release, name="chat_console_release"),
]
