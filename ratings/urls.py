from django.urls import path

from . import views

app_name = "ratings"

urlpatterns = [
    path("", views.home, name="home"),
    path("s/<slug:slug>/", views.study_entry, name="entry"),
    path("s/<slug:slug>/start/", views.study_start, name="start"),
    path("s/<slug:slug>/step/", views.study_step, name="step"),
    path("s/<slug:slug>/return/", views.study_return, name="return"),
    path("s/<slug:slug>/look.css", views.study_stylesheet, name="stylesheet"),
]
