FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 VAR_DIR=/app/var
WORKDIR /app
COPY pyproject.toml requirements.lock ./
RUN pip install --no-cache-dir -c requirements.lock . && useradd --create-home app
COPY . .
RUN DJANGO_ENV=local python manage.py collectstatic --noinput && chown -R app /app/var
USER app
EXPOSE 8000
CMD ["gunicorn", "config.wsgi", "--bind", "0.0.0.0:8000", "--workers", "4", "--access-logfile", "-"]
