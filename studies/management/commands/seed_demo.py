"""python manage.py seed_demo: each kind's demo studies and an admin login (safe to run again)."""

import os

from django.core.management.base import BaseCommand

from studies.demo.seed import ADMIN_USERNAME, demo_seed


class Command(BaseCommand):
    help = (
        "Create (if missing) each kind's demo studies and the superuser `admin`, and print how to reach them."
    )
    # `make run` calls this right after `migrate`, which has just run the system checks; running them again
    # would import every app's heavy dependencies for nothing (seconds on every start).
    requires_system_checks = []

    def handle(self, *args, **options):
        host = os.environ.get("HOST", "127.0.0.1")
        if host in {"0.0.0.0", "::"}:  # listening everywhere: the browser still reaches it on loopback
            host = "127.0.0.1"
        port = os.environ.get("PORT", "8000")
        info = demo_seed(base_url=f"http://{host}:{port}")
        for name, study in info.kind_studies.items():
            self.stdout.write(
                f"{name.capitalize()} demo study '{study.slug}': {study.state}, "
                f"conditions {', '.join(study.conditions.values_list('name', flat=True))}."
            )
        for name, link in info.kind_links.items():
            self.stdout.write(f"{name.capitalize()} participant link: {link}")
        for what, link in info.staff_links:
            self.stdout.write(f"{what}: {link}")
        for name, study in info.closed_studies.items():
            self.stdout.write(
                f"Analysis of {study.title} ({study.participants.count()} participants, sign in as admin): "
                f"{info.analysis_links[name]}"
            )
        password = info.admin_password or "(unchanged: set it with `manage.py changepassword admin`)"
        self.stdout.write(f"Admin: {info.admin_link}  user {ADMIN_USERNAME}  password {password}")
