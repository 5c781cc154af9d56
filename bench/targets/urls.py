"""Included by config/urls.py only while BENCH_FLOOR_ENABLED=1 (the floor takes unauthenticated writes)."""

from django.urls import path

from .views import floor_write, page_ceiling

urlpatterns = [
    path("bench/floor/", floor_write, name="bench-floor"),
    path("bench/page/", page_ceiling, name="bench-page"),
]
