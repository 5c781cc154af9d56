"""python manage.py analyst_token <username> [--create [--password]] [--study SLUG] [--days N] [--rotate]: a new
API token for an analyst (read-only by construction: the API has no write endpoints). The key is printed once and
only its hash is kept (analysis.tokens); it expires after --days (ANALYST_TOKEN_DAYS by default) and, with --study,
reads that study only.

The admin's *API tokens* page (analysis/admin.py) issues the same tokens without a terminal. The token is for
scripts. To sign in to the analysis pages in a browser the user needs a password: `--password`
(with --create) sets a generated one and prints it once; otherwise the command says how to set one
(`manage.py changepassword`). The key alone is printed on stdout, so scripts can read it; the rest goes to
stderr."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from analysis.models import AnalystToken
from analysis.permissions import analyst_grant
from analysis.tokens import analyst_token_issue
from studies.models import Study


class Command(BaseCommand):
    help = "Put a user in the Analysts group and print a new API token (shown once)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument(
            "--create",
            action="store_true",
            help="Create the user (no password: token only, unless --password).",
        )
        parser.add_argument(
            "--password",
            action="store_true",
            help="With --create: give the new user a generated password, printed once, to sign in to the "
            "analysis pages in a browser (/analysis/login/).",
        )
        parser.add_argument("--rotate", action="store_true", help="Revoke the user's other tokens.")
        parser.add_argument("--study", help="Limit the token to this study (its slug).")
        parser.add_argument(
            "--days", type=int, help="Days until the token expires (default ANALYST_TOKEN_DAYS)."
        )

    @transaction.atomic
    def handle(self, *args, username, create, rotate, password=False, study=None, days=None, **options):
        scope = None
        if study:
            scope = Study.objects.filter(slug=study).first()
            if scope is None:
                raise CommandError(f"no study {study!r}")
        if days is not None and days < 1:
            raise CommandError("--days must be at least 1")
        if password and not create:
            raise CommandError(
                "--password goes with --create (for an existing user: manage.py changepassword)"
            )
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create:
                raise CommandError(f"no user {username!r} (use --create to make one)")
            user = User.objects.create_user(username=username)
            secret = secrets.token_urlsafe(18) if password else None
            if secret:
                user.set_password(secret)
            else:
                user.set_unusable_password()
            user.save(update_fields=["password"])
            if secret:
                self.stderr.write(
                    f"Password of {username} (shown once), to sign in at /analysis/login/: {secret}"
                )
            else:
                self.stderr.write(
                    f"{username} has no password: the token below is for scripts. To sign in to the analysis "
                    f"pages in a browser too, run: python manage.py changepassword {username}"
                )
        analyst_grant(user)
        if rotate:
            AnalystToken.objects.filter(user=user).delete()
        self.stdout.write(analyst_token_issue(user=user, study=scope, days=days))
