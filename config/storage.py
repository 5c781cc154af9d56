"""Where the site's files go (`FILE_STORAGE`): files another replica must read can never be on one disk in
production (config/production.py refuses it).

* `local`: the local filesystem under VAR_DIR/media, for `make run` and the test suite;
* `s3`: an S3-compatible bucket through django-storages (`AWS_STORAGE_BUCKET_NAME`, `AWS_S3_ENDPOINT_URL`,
  `AWS_S3_REGION_NAME`; boto3 reads the credentials from `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`);
* `none`: production's default. Everything the site keeps is in PostgreSQL (answers, analyses; reports and
  exports are rendered from it on request), so no file is stored; writing one is a mistake and fails loudly.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.core.files.storage import Storage
from django.utils.deconstruct import deconstructible

from .env import env_str

BACKENDS = ("local", "s3", "none")


@deconstructible
class NoFileStorage(Storage):
    """A storage that keeps nothing: every read or write says where files should go instead."""

    def _refuse(self, *args, **kwargs):
        raise ImproperlyConfigured(
            "No file storage is configured (FILE_STORAGE=none): set FILE_STORAGE=s3 and AWS_STORAGE_BUCKET_NAME "
            "to keep files every replica can read."
        )

    _open = _save = delete = exists = listdir = size = url = path = _refuse
    get_accessed_time = get_created_time = get_modified_time = _refuse


def default_storage(backend: str, media_root) -> dict:
    """The STORAGES["default"] entry for `backend` (one of BACKENDS)."""
    if backend == "local":
        return {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": media_root}}
    if backend == "s3":
        bucket = env_str("AWS_STORAGE_BUCKET_NAME", "")
        if not bucket:
            raise ImproperlyConfigured("FILE_STORAGE=s3 needs AWS_STORAGE_BUCKET_NAME.")
        options = {
            "bucket_name": bucket,
            "endpoint_url": env_str("AWS_S3_ENDPOINT_URL", "") or None,
            "region_name": env_str("AWS_S3_REGION_NAME", "") or None,
            # Private objects, handed out by short-lived signed links.
            "default_acl": None,
            "querystring_auth": True,
            "file_overwrite": False,
        }
        return {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options}
    if backend == "none":
        return {"BACKEND": "config.storage.NoFileStorage"}
    raise ImproperlyConfigured(f"FILE_STORAGE={backend!r}: use one of {', '.join(BACKENDS)}.")
