"""The web processes' application in production: ASGI (gunicorn with uvicorn workers, docker-compose and the Helm
chart). Django runs the site's sync views in a thread each, as under WSGI, and serves an async view's stream (a
chat reply, kinds/chat/stream.py) from the event loop, so a process holds many open conversations at once.
The same preloading as config/wsgi.py: the URLconf and the warm analyses, once in gunicorn's master."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_asgi_application()

from config.warm import server_preload  # noqa: E402 - it reads the kinds' registry: after Django is set up

server_preload()
