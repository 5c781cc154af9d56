"""python manage.py analyst_token <username> [--create]: an API token for an analyst (read-only by construction:
the API has no write endpoints)."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from rest_framework.authtoken.models import Token

from analysis.permissions import ANALYSTS_GROUP


class Command(BaseCommand):
    help = "Put a user in the Analysts group and print their API token (created if missing)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument(
            "--create", action="store_true", help="Create the user (no password: token only)."
        )
        parser.add_argument("--rotate", action="store_true", help="Replace an existing token with a new one.")

    @transaction.atomic
    def handle(self, *args, username, create, rotate, **options):
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create:
                raise CommandError(f"no user {username!r} (use --create to make one)")
            user = User.objects.create_user(username=username)
            user.set_unusable_password()
            user.save(update_fields=["password"])
        group, _ = Group.objects.get_or_create(name=ANALYSTS_GROUP)
        user.groups.add(group)
        if rotate:
            Token.objects.filter(user=user).delete()
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(token.key)
