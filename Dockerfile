FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 VAR_DIR=/app/var
WORKDIR /app
COPY pyproject.toml requirements.lock ./
RUN pip install --no-cache-dir -c requirements.lock . && useradd --create-home --uid 1000 app
COPY . .
# Collected with the production storage (hashed names + manifest), which production pages look files up in.
RUN DJANGO_ENV=production SECRET_KEY=collectstatic-only-not-a-secret-collectstatic-only-not-a-secret \
    REDIS_URL=redis://collectstatic-only:6379/0 \
    ALLOWED_HOSTS=build python manage.py collectstatic --noinput && chown -R app /app/var
USER app
EXPOSE 8000
CMD ["gunicorn", "config.asgi", "--worker-class", "uvicorn_worker.UvicornWorker", "--bind", "0.0.0.0:8000", "--workers", "4", "--graceful-timeout", "25"]
