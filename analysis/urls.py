from django.urls import path

app_name = "analysis"

urlpatterns: list = []
