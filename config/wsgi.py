import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()
# The URLconf (and every view module it imports) is loaded here rather than on each worker's first request.
# Under gunicorn --preload (docker-compose, bench/) that happens once in the master, before the workers fork,
# so no worker's first participant waits for it, and the workers share those pages of memory.
get_resolver().url_patterns  # noqa: B018 - loaded for its side effect
