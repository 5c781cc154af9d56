"""The WSGI application (`make run`'s runserver, tests, tools). Production serves config/asgi.py."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

from config.warm import server_preload  # noqa: E402 - it reads the kinds' registry: after Django is set up

server_preload()
