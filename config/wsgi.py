import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_application = get_wsgi_application()
# The URLconf (and every view module it imports: the analysis stack with pandas, statsmodels and matplotlib)
# is loaded here rather than on each worker's first request. Under gunicorn --preload (docker-compose,
# bench/) that happens once in the master, before the workers fork, so no worker's first participant waits
# seconds for it, and the workers share those pages of memory.
get_resolver().url_patterns  # noqa: B018 - loaded for its side effect

from ratings.answer_path import AnswerFront  # noqa: E402 - needs the apps loaded above

# In-place answers on PostgreSQL are taken before Django's request handling; everything else goes to Django
# (ratings/answer_path.py).
application = AnswerFront(django_application)
