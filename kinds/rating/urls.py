"""The rating kind's own participant address: the picture check's sound (kinds/rating/picture_sound.py)."""

from django.urls import path

from . import picture_sound

app_name = "rating_kind"

urlpatterns = [
    path("s/<slug:slug>/step/sound/", picture_sound.picture_sound, name="picture_sound"),
]
