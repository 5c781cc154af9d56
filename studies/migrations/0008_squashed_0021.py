"""The schema of migrations 0008-0021, squashed: two partial indexes and the participant's `last_seen_at` without an
index of its own (it is written on every step, and nothing searches by it alone).

Those migrations also created SQL functions, triggers, tally tables and two counters for a second, SQL
implementation of the participant path. That implementation is gone; a database that ran them has what they
left removed by the next migration (0009_participant_path_in_python)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    replaces = [
        ("studies", "0008_rating_answer_in_place"),
        ("studies", "0009_response_eligible_index"),
        ("studies", "0010_responsetally"),
        ("studies", "0011_participant_hot_updates"),
        ("studies", "0012_rating_items_begin_in_place"),
        ("studies", "0013_rating_enrol_in_place"),
        ("studies", "0014_answer_counts_its_rate_limit"),
        ("studies", "0015_tally_by_condition"),
        ("studies", "0016_enrolment_counts_completed_by_tally"),
        ("studies", "0017_stored_answer_not_counted"),
        ("studies", "0018_deal_reads_the_tally_alone"),
        ("studies", "0019_deal_reads_only_what_it_deals"),
        ("studies", "0020_rating_consent_begin_in_place"),
        ("studies", "0021_rating_answer_begun_in_place"),
    ]

    dependencies = [("studies", "0007_study_waves")]

    operations = [
        migrations.AddIndex(
            model_name="response",
            index=models.Index(
                condition=models.Q(("sample_index", 0), models.Q(("review", "flagged"), _negated=True)),
                fields=["condition", "id"],
                name="response_eligible_by_cond",
            ),
        ),
        migrations.AlterField(
            model_name="participant", name="last_seen_at", field=models.DateTimeField(auto_now_add=True)
        ),
        migrations.AddIndex(
            model_name="participant",
            index=models.Index(
                condition=models.Q(("status", "active")), fields=["condition"], name="participant_active_cond"
            ),
        ),
    ]
