from django.urls import path

from . import views

app_name = "recruiting"

urlpatterns = [
    path("prolific/webhook/<slug:slug>/", views.prolific_webhook, name="prolific-webhook"),
]
