from django.urls import path

from . import views

app_name = "analysis"

urlpatterns = [
    path("", views.index, name="index"),
    path("<slug:slug>/", views.dashboard, name="dashboard"),
    path("<slug:slug>/figures/<str:name>.<str:fmt>", views.figure, name="figure"),
    path("<slug:slug>/exports/<str:what>.csv", views.export, name="export"),
    path("<slug:slug>/tables/<str:name>.csv", views.table, name="table"),
]
