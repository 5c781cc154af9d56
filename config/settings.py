"""Settings, every one from the environment.

Without any environment the site runs locally: an SQLite file under var/, Celery tasks run in-process.
With DJANGO_ENV=production it refuses to start without its secrets.
"""

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from .env import env_bool, env_int, env_list, env_str, fernet_key_valid, local_secret
from .logging import build_logging, sentry_init
from .production import process_local_problems
from .storage import default_storage

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DJANGO_ENV = env_str("DJANGO_ENV", "local")
if DJANGO_ENV not in {"local", "production", "test"}:
    raise ImproperlyConfigured(f"DJANGO_ENV={DJANGO_ENV!r}: use local, test or production.")
PRODUCTION = DJANGO_ENV == "production"

if PRODUCTION:
    SECRET_KEY = env_str("SECRET_KEY")  # no default: production refuses to start without it
    if len(SECRET_KEY) < 50:
        raise ImproperlyConfigured("SECRET_KEY must be at least 50 characters in production.")
    DEBUG = env_bool("DEBUG", False)
    ALLOWED_HOSTS = env_list("ALLOWED_HOSTS")
    if not ALLOWED_HOSTS:
        raise ImproperlyConfigured("ALLOWED_HOSTS is required in production.")
else:
    SECRET_KEY = env_str("SECRET_KEY", "local-only-insecure-key-do-not-use-in-production-0123456789")
    DEBUG = env_bool("DEBUG", DJANGO_ENV == "local")
    ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")

CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "studies.apps.ResearchAdminConfig",  # django.contrib.admin, with the researcher's home as its index
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served from our own static files, not a CDN
    "axes",
    "studies",
    # The study kinds: one package each (docs/architecture.md, "A new study kind").
    "kinds.rating",
    "kinds.questionnaire",
    "kinds.pairwise",
    "kinds.chat",
    "ratings",
    "generation",
    "analysis",
    "recruiting",
]

MIDDLEWARE = [
    "config.middleware.RequestIdMiddleware",
    # Refuses an oversized body from its Content-Length before anything reads it (config/middleware.py).
    "config.middleware.RequestBodyLimitMiddleware",
    # django-csp's, with the policy built once (config/middleware.py).
    "config.middleware.ContentSecurityPolicyMiddleware",
    # /healthz answers before host validation and the SSL redirect (the container's own check calls it by IP).
    "config.middleware.HealthCheckMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # A participant's ticket (ratings/tickets.py), set on the response that enrolled or resumed them.
    "ratings.tickets.TicketMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Signs staff and analysts out after ACCOUNT_IDLE_TIMEOUT_SECONDS without a request (config/middleware.py).
    "config.middleware.AccountIdleTimeoutMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # An admin form posted and refused answers 400, not 200 (config/middleware.py).
    "config.middleware.AdminFormRefusalMiddleware",
    # Login throttling (django-axes): last, as its documentation asks.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("DB_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded database of `make run`: one writer at a time, so wait for the lock instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update({"timeout": 20, "transaction_mode": "IMMEDIATE"})
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    # ASVS level 2 asks for at least 12 characters.
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": env_int("PASSWORD_MIN_LENGTH", 12)},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)  # WhiteNoise warns on every request when it is missing
STATICFILES_DIRS = [BASE_DIR / "static"]
MEDIA_ROOT = VAR_DIR / "media"
# Files another replica must read (reports, exports, uploads): config/storage.py. Local disk only off production.
FILE_STORAGE = env_str("FILE_STORAGE", "none" if PRODUCTION else "local")
STORAGES = {
    "default": default_storage(FILE_STORAGE, MEDIA_ROOT),
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PRODUCTION
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

LOGIN_URL = "admin:login"
# Where a sign-in without `next` lands (the analysts' login page; the admin's own goes to the admin).
LOGIN_REDIRECT_URL = "analysis:index"

# --- Celery -------------------------------------------------------------------------------------------
# Without REDIS_URL, tasks run in-process (eagerly): `make run` needs no broker.
REDIS_URL = env_str("REDIS_URL", "")
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 600)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 540)
# Well above the task time limit, so a slow task is never redelivered while it still runs.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600)}
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
# How often the beat job reads every linked study's submissions on Prolific (the admin says when it runs next).
PROLIFIC_RECONCILE_SECONDS = env_int("PROLIFIC_RECONCILE_SECONDS", 300)
# Sends only while it holds a lease in Redis: a second beat started by mistake sends nothing (config/beat.py).
CELERY_BEAT_SCHEDULER = "config.beat.LeaderScheduler"
CELERY_BEAT_SCHEDULE = {
    # Gives back the slots and items of participants who went silent (ratings/tasks.py).
    "release-stale-participants": {"task": "ratings.tasks.release_stale_participants", "schedule": 60.0},
    # Re-dispatches generation items whose worker died mid-call (generation/tasks.py).
    "generation-sweep": {"task": "generation.tasks.generation_sweep_task", "schedule": 120.0},
    # Collects finished OpenAI Batch API batches (generation/batches.py).
    "generation-batches-poll": {"task": "generation.tasks.generation_batches_poll_task", "schedule": 60.0},
    # Collects finished Batch API batches of LLM judges (generation/judge_batches.py).
    "judge-batches-poll": {"task": "generation.tasks.judge_batches_poll_task", "schedule": 60.0},
    # Analyses live rating studies whose ratings changed, ahead of the next dashboard view (analysis/tasks.py).
    "analysis-refresh-live": {"task": "analysis.tasks.analysis_refresh_live_task", "schedule": 60.0},
    # The same for the pairwise studies' analysts' page (kinds/pairwise/views.py).
    "pairwise-pages-refresh": {"task": "kinds.pairwise.tasks.pairwise_pages_refresh_task", "schedule": 60.0},
    # Reports each LLM judge whose study's data or ratings changed, ahead of the next view (analysis/judge_ahead.py).
    "judge-reports-refresh": {"task": "analysis.tasks.judge_reports_refresh_task", "schedule": 120.0},
    # Reads every linked study's submissions on Prolific and repairs what lost webhooks left (recruiting/tasks.py).
    "prolific-reconcile": {
        "task": "recruiting.tasks.prolific_reconcile_all",
        "schedule": float(PROLIFIC_RECONCILE_SECONDS),
    },
}

# --- Recruiting (recruiting/) ---------------------------------------------------------------------------
# Prolific's public API; the token is read from the environment variable each linked study names.
PROLIFIC_API_URL = env_str("PROLIFIC_API_URL", "https://api.prolific.com/api/v1/")
if not PROLIFIC_API_URL.startswith(("https://", "http://")):
    raise ImproperlyConfigured("PROLIFIC_API_URL must be an http(s) address.")
# The recruiting token's and webhook secret's variables start with this (recruiting/models.py); a provider's
# key variable never does (generation/keys.py), so the credential that approves and pays cannot reach an LLM host.
RECRUITING_SECRET_PREFIX = "PROLIFIC_"
# Calls per request before a transient error (timeout, 429, 5xx) is given up; backoff in seconds.
PROLIFIC_MAX_ATTEMPTS = env_int("PROLIFIC_MAX_ATTEMPTS", 5)
PROLIFIC_BACKOFF_BASE = env_int("PROLIFIC_BACKOFF_BASE_MS", 1000) / 1000
PROLIFIC_BACKOFF_CAP = env_int("PROLIFIC_BACKOFF_CAP_MS", 30000) / 1000
PROLIFIC_TIMEOUT_SECONDS = env_int("PROLIFIC_TIMEOUT_MS", 15000) / 1000
# A Retry-After from Prolific is waited exactly; one longer than this fails the call (as transient) instead.
PROLIFIC_RETRY_AFTER_MAX = env_int("PROLIFIC_RETRY_AFTER_MAX_SECONDS", 120)

# --- Generation (generation/) ---------------------------------------------------------------------------
# The queue generation tasks go to (workers consume the default "celery" queue unless told otherwise).
GENERATION_QUEUE = env_str("GENERATION_QUEUE", "celery")
# A running item whose worker has not reported for this long is taken over by another (worker died).
GENERATION_LEASE_SECONDS = env_int("GENERATION_LEASE_SECONDS", 300)
# A pending item never attempted whose message went out this long ago is sent again by the sweep: its message
# may have died with a worker that had taken it off the queue but not started it (the broker would return it
# only after CELERY_VISIBILITY_TIMEOUT). Longer than a queue normally takes to drain: each re-send of an item
# still waiting its turn is one more message, which the claim makes a no-op.
GENERATION_REDISPATCH_SECONDS = env_int("GENERATION_REDISPATCH_SECONDS", 900)
# Retries of transient provider errors: exponential from BASE, capped at CAP (milliseconds), plus jitter.
GENERATION_BACKOFF_BASE = env_int("GENERATION_BACKOFF_BASE_MS", 1000) / 1000
GENERATION_BACKOFF_CAP = env_int("GENERATION_BACKOFF_CAP_MS", 60000) / 1000
# How long a worker waits for a provider's rate limit before re-queueing the item instead (seconds).
GENERATION_MAX_LIMIT_WAIT = env_int("GENERATION_MAX_LIMIT_WAIT", 20)
# Without a broker (`make run`) items run on this many background threads of the web process.
GENERATION_LOCAL_THREADS = env_int("GENERATION_LOCAL_THREADS", 4)
# A condition's run stops (its waiting items cancelled, the reason on its job) once this many items have failed
# with the same permanent error (a refused key, a model or path not served, no quota); 0 never stops.
GENERATION_STOP_AFTER_SAME_FAILURES = env_int("GENERATION_STOP_AFTER_SAME_FAILURES", 3)
# A provider's key variable must look like a key (generation/keys.py: NAME_API_KEY, NAME_TOKEN, NAME_KEY) and is
# never one of the site's own secrets: these names, every DJANGO_* name, and any added here (comma-separated).
PROVIDER_KEY_ENV_DENYLIST = [
    "SECRET_KEY", "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SENTRY_DSN",
    *env_list("PROVIDER_KEY_ENV_DENYLIST", ""),
]  # fmt: skip
# Where a provider's key may be sent (generation/keys.py): NAME=host entries, comma-separated, one per host (a
# name may appear more than once). These vendors are bound by default; PROVIDER_KEY_HOSTS adds to them. A key
# variable not listed here may be sent only to a host of PROVIDER_URL_ALLOWLIST (the operator's own servers).
PROVIDER_KEY_HOSTS = [
    "OPENAI_API_KEY=api.openai.com", "ANTHROPIC_API_KEY=api.anthropic.com",
    "TOGETHER_API_KEY=api.together.xyz", "GEMINI_API_KEY=generativelanguage.googleapis.com",
    "MISTRAL_API_KEY=api.mistral.ai", "GROQ_API_KEY=api.groq.com", "OPENROUTER_API_KEY=openrouter.ai",
    "DEEPSEEK_API_KEY=api.deepseek.com", "FIREWORKS_API_KEY=api.fireworks.ai",
    *env_list("PROVIDER_KEY_HOSTS", ""),
]  # fmt: skip
# The outbound policy for provider URLs (generation/outbound.py): only public addresses are dialled, unless the
# host is listed here by name (vllm, ollama.internal) or falls in a listed network (10.0.0.0/8). Production
# lists nothing by default; the test suite and `make run` allow loopback (their endpoints run on this machine).
# Cloud metadata addresses are refused even when listed.
PROVIDER_URL_ALLOWLIST = env_list(
    "PROVIDER_URL_ALLOWLIST", "" if PRODUCTION else "localhost,127.0.0.0/8,::1/128"
)

# Provider keys typed in the admin are stored encrypted (Fernet) with these keys: comma-separated, the first
# encrypts, every one decrypts (add a new first key to rotate; `manage.py provider_keys_reseal` re-encrypts).
# Generate one with `python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`.
# Production has no default: without it a key can only come from the environment. Locally a secret is made once
# under var/ (a file, so keys typed in a local admin survive restarts).
PROVIDER_KEYS_SECRET = env_list("PROVIDER_KEYS_SECRET", "")
if not PROVIDER_KEYS_SECRET and not PRODUCTION:
    PROVIDER_KEYS_SECRET = [local_secret(VAR_DIR / "provider_keys_secret")]
for _secret in PROVIDER_KEYS_SECRET:
    if not fernet_key_valid(_secret):
        raise ImproperlyConfigured(
            "PROVIDER_KEYS_SECRET must hold Fernet keys (32 random bytes, URL-safe base64, 44 characters), "
            "comma-separated; generate one with Fernet.generate_key()."
        )

CACHES = {
    "default": (
        {
            "BACKEND": "config.cache.RedisCache",
            "LOCATION": REDIS_URL,
            # Short timeouts: a hung Redis must not stall participant pages (the rate limiter fails open).
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    ),
    # The consent and instructions pages, rendered once per worker process (ratings/shared_pages.py).
    "participant-pages": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "participant-pages",
        "TIMEOUT": None,
        "OPTIONS": {"MAX_ENTRIES": 200},
    },
}

# Sessions: read from Redis when there is one, the database being the record (see config/sessions.py).
SESSION_ENGINE = env_str(
    "SESSION_ENGINE", "config.sessions" if REDIS_URL else "django.contrib.sessions.backends.db"
)
# The admin's messages ("… was changed successfully") are kept in the session rather than in a signed cookie:
# Django's default (a cookie, falling back to the session) sets up a cookie signer on every request,
# participant pages included (~0.2 ms of CPU), though only the admin ever shows a message.
MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"

# --- REST API -----------------------------------------------------------------------------------------
# Analysts' tokens are hashed, expire after ANALYST_TOKEN_DAYS and may be limited to one study (analysis/tokens.py).
ANALYST_TOKEN_DAYS = env_int("ANALYST_TOKEN_DAYS", 90)
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "analysis.tokens.HashedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 100,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Empathy studies API",
    "DESCRIPTION": "Read-only access to studies, aggregates and exports for analysts.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and its docs: staff, Analysts and analyst-token holders only (analysis/permissions.py).
    "SERVE_PERMISSIONS": ["analysis.permissions.IsAnalyst"],
    "SERVE_AUTHENTICATION": [
        "analysis.tokens.HashedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Swagger UI from drf-spectacular-sidecar's pinned copy in our static files (no CDN, CSP 'self').
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Deep links would put a link inside each operation's toggle button (nested controls, which screen readers
    # and axe-core refuse); the page's own template and static/api/ fix its language, contrast and keyboard use.
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
}

# --- Exports -----------------------------------------------------------------------------------------
# Analysts' exports carry a stable pseudonym instead of each participant's platform id (analysis/pseudonyms.py),
# an HMAC keyed by EXPORT_PSEUDONYM_KEY (default: derived from SECRET_KEY). Staff see raw platform ids only when
# EXPORT_RAW_IDS_FOR_STAFF is on (the default: paying and reviewing on Prolific needs them); off, everyone
# gets pseudonyms.
EXPORT_PSEUDONYM_KEY = env_str("EXPORT_PSEUDONYM_KEY", "")
EXPORT_RAW_IDS_FOR_STAFF = env_bool("EXPORT_RAW_IDS_FOR_STAFF", True)
# A study of more participants than this has its exports written to a file by a worker, kept in the database for
# EXPORT_FILE_KEEP_DAYS and downloaded from its page (analysis/export_files.py); smaller ones stream in the request.
EXPORT_FILE_ABOVE_PARTICIPANTS = env_int("EXPORT_FILE_ABOVE_PARTICIPANTS", 20_000)
EXPORT_FILE_KEEP_DAYS = env_int("EXPORT_FILE_KEEP_DAYS", 7)

# --- Participants -------------------------------------------------------------------------------------
# A participant who has not yet agreed to the consent form holds their place for this long only (then the
# study's full time limit): an id that opens the link and goes no further frees its place quickly.
PARTICIPANT_CONSENT_HOLD_MINUTES = env_int("PARTICIPANT_CONSENT_HOLD_MINUTES", 10)
# The authenticity score's one timing threshold (studies/authenticity.py): a median time on item pages below
# this many milliseconds counts as faster than a person reads. Lower it only with a reason (bench/authenticity.py
# lowers it by the factor it compresses its simulated reading times by).
AUTHENTICITY_FAST_PAGE_MS = env_int("AUTHENTICITY_FAST_PAGE_MS", 1500)
# The cookie naming a browser's participant, so that their pages need no session (ratings/tickets.py).
PARTICIPANT_TICKET_COOKIE_NAME = "participant_ticket"

# --- Security -----------------------------------------------------------------------------------------
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if PRODUCTION:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    # Off by default: both bind every subdomain of the site's domain to HTTPS, and a preload list entry takes
    # months to undo (Django's deployment checklist warns of it). Turn them on once every subdomain serves HTTPS.
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
    # `check --deploy` warns about both; off is the deliberate default above.
    SILENCED_SYSTEM_CHECKS = [
        *([] if SECURE_HSTS_INCLUDE_SUBDOMAINS else ["security.W005"]),
        *([] if SECURE_HSTS_PRELOAD else ["security.W021"]),
    ]

# Signed-in accounts (staff, analysts) are signed out after this long without a request, and this long after
# signing in whatever they do (config/middleware.py). Participants have no account and are not affected.
ACCOUNT_IDLE_TIMEOUT_SECONDS = env_int("ACCOUNT_IDLE_TIMEOUT_SECONDS", 30 * 60)
ACCOUNT_SESSION_MAX_SECONDS = env_int("ACCOUNT_SESSION_MAX_SECONDS", 12 * 3600)
# Browser features no page of the site uses, switched off for every page (config/middleware.py).
PERMISSIONS_POLICY = (
    "accelerometer=(), camera=(), geolocation=(), gyroscope=(), magnetometer=(), microphone=(), "
    "payment=(), usb=(), interest-cohort=()"
)

# A Content-Security-Policy on every response (django-csp): scripts only from our own static files (no
# inline script anywhere: templates load static/*.js), no framing, forms post to us or to MTurk's
# externalSubmit. Inline *styles* stay allowed: templates carry small <style> blocks and the honeypot's
# off-screen style attribute, and styles cannot run code.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'", "https://www.mturk.com", "https://workersandbox.mturk.com"],
    }
}

# Login throttling (django-axes) on every login form (the admin's and /analysis/login/): after
# AXES_FAILURE_LIMIT failures for one username from one address, or from one address whatever the
# usernames, further attempts from that address are refused (429, no password hashed) until
# AXES_COOLOFF_MINUTES after the last failure; `manage.py axes_reset` (or deleting the access attempts in
# the admin) ends a lock-out at once. Guessing one username's password from many addresses is throttled too:
# after AXES_FAILURE_LIMIT failures over all addresses, that username is refused from every address it never
# signed in from, while its owner still gets in from a known one (config/login_throttle.py). Addresses as
# the rate limiter sees them (behind RATELIMIT_TRUSTED_PROXIES proxies).
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 10)
AXES_COOLOFF_TIME = env_int("AXES_COOLOFF_MINUTES", 15) / 60  # hours
AXES_LOCKOUT_PARAMETERS = "config.login_throttle.lockout_parameters"
AXES_CLIENT_IP_CALLABLE = "config.ratelimit.client_ip"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "errors/login_locked.html"
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out login before any password hash
    "django.contrib.auth.backends.ModelBackend",
]

# --- Operations ---------------------------------------------------------------------------------------
# One JSON object per line (request id, path, status, duration on access lines); LOG_FORMAT=plain for humans.
LOGGING = build_logging(level=env_str("LOG_LEVEL", "INFO"), fmt=env_str("LOG_FORMAT", "json"))
# Error reporting is on only when SENTRY_DSN is set.
SENTRY_DSN = env_str("SENTRY_DSN", "")
sentry_init(
    dsn=SENTRY_DSN,
    environment=DJANGO_ENV,
    traces_sample_rate=float(env_str("SENTRY_TRACES_SAMPLE_RATE", "0")),
)

# Rate limits on participant pages, per minute (see config/ratelimit.py). RATELIMIT_TRUSTED_PROXIES: how many
# proxies in front of the app append the client address to X-Forwarded-For (0: use the socket's address).
RATELIMIT_ENABLED = env_bool("RATELIMIT_ENABLED", True)
RATELIMIT_ENTRY_PER_IP = env_int("RATELIMIT_ENTRY_PER_IP", 30)
RATELIMIT_PARTICIPANT = env_int("RATELIMIT_PARTICIPANT", 60)
RATELIMIT_TRUSTED_PROXIES = env_int("RATELIMIT_TRUSTED_PROXIES", 0)
# New enrollments (ids the study has not seen; resuming is not counted), per RATELIMIT_ENROLL_WINDOW
# seconds: per study in all, and per client address where the study sets a limit of its own
# (`Study.enrollments_per_address`, blank by default).
RATELIMIT_ENROLL_WINDOW = env_int("RATELIMIT_ENROLL_WINDOW", 3600)
RATELIMIT_ENROLL_PER_STUDY = env_int("RATELIMIT_ENROLL_PER_STUDY", 10000)
# Request bodies (without uploaded files) above this are refused with 400: participant forms are a few
# hundred bytes and admin forms a few KB, so a multi-megabyte body is a mistake or an attack.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 512 * 1024)
# Any body, of any content type (multipart uploads included), declared larger than this is refused with 413
# from its Content-Length before a byte of it is read (config/middleware.py); the admin's corpus import
# takes files up to REQUEST_BODY_MAX_IMPORT_BYTES. nginx enforces the same limits while streaming
# (deploy/nginx.conf.template, chunked bodies included).
REQUEST_BODY_MAX_BYTES = env_int("REQUEST_BODY_MAX_BYTES", 1024 * 1024)
REQUEST_BODY_MAX_IMPORT_BYTES = env_int("REQUEST_BODY_MAX_IMPORT_BYTES", 200 * 1024 * 1024)
REQUEST_BODY_LARGE_PATHS = [r"^/admin/studies/study/import/$"]
# Installs the benchmark targets (bench/targets/: the one-row-write floor and the page ceiling that
# bench/participants.py measures against) and routes /bench/. Never on in a real deployment; on by default
# in the test suite, which tests them.
BENCH_FLOOR_ENABLED = env_bool("BENCH_FLOOR_ENABLED", DJANGO_ENV == "test")
if BENCH_FLOOR_ENABLED:
    INSTALLED_APPS.append("bench.targets")

# Every replica must see what another wrote: production refuses process-local caches, sessions and files
# (config/production.py). Every replica must also share SECRET_KEY and PROVIDER_KEYS_SECRET (docs/deployment.md).
if PRODUCTION:
    _problems = process_local_problems(
        caches=CACHES, session_engine=SESSION_ENGINE, session_cache_alias="default", storages=STORAGES
    )
    if _problems:
        raise ImproperlyConfigured(
            "Production settings keep state in one process: " + "; ".join(_problems) + "."
        )
# The toy study kind of the tests (tests/toy_kind/: a kind is one package and this one line).
if DJANGO_ENV == "test":
    INSTALLED_APPS.append("tests.toy_kind")
