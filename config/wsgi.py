import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()
# The URLconf (and every view module it imports) is loaded here rather than on each worker's first request.
# Under gunicorn --preload (docker-compose, bench/) that happens once in the master, before the workers fork,
# so no worker's first participant waits for it, and the workers share those pages of memory.
get_resolver().url_patterns  # noqa: B018 - loaded for its side effect
# So are the analysis modules (seconds of pandas, SciPy, statsmodels, matplotlib) and, without a broker, the
# dashboards' analyses asked for in the background (config/warm.py): no researcher's first page waits for them.
from config.warm import server_warm  # noqa: E402 - it reads the kinds' registry: after Django is set up

server_warm()
