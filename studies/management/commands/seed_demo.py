"""python manage.py seed_demo: the live demo study and an admin login (safe to run again)."""

import os

from django.core.management.base import BaseCommand

from studies.demo.seed import ADMIN_USERNAME, demo_seed


class Command(BaseCommand):
    help = "Create (if missing) the live demo study `demo` and the superuser `admin`, and print how to reach them."
    # `make run` calls this right after `migrate`, which has just run the system checks; running them again
    # would import every app's heavy dependencies for nothing (seconds on every start).
    requires_system_checks = []

    def handle(self, *args, **options):
        host = os.environ.get("HOST", "127.0.0.1")
        if host in {"0.0.0.0", "::"}:  # listening everywhere: the browser still reaches it on loopback
            host = "127.0.0.1"
        port = os.environ.get("PORT", "8000")
        info = demo_seed(base_url=f"http://{host}:{port}")
        study = info.study
        state = "created" if info.study_created else "already there"
        self.stdout.write(
            f"Demo study '{study.slug}' ({state}): {study.state}, {study.prompts.count()} prompts, "
            f"conditions {', '.join(study.conditions.values_list('name', flat=True))}."
        )
        self.stdout.write(f"Questionnaire study '{info.questionnaire.slug}': {info.questionnaire.state}.")
        self.stdout.write(f"Participant link: {info.participant_link}")
        self.stdout.write(f"Questionnaire participant link: {info.questionnaire_link}")
        for name, link in info.kind_links.items():
            self.stdout.write(f"{name.capitalize()} participant link: {link}")
        for what, link in info.staff_links:
            self.stdout.write(f"{what}: {link}")
        self.stdout.write(
            f"Analysis of published ratings (90 raters, 900 ratings, sign in as admin): {info.analysis_link}"
        )
        password = info.admin_password or "(unchanged: set it with `manage.py changepassword admin`)"
        self.stdout.write(f"Admin: {info.admin_link}  user {ADMIN_USERNAME}  password {password}")
