# The rating kind's Rating and the pairwise kind's PairwiseSettings and PairItem leave the studies app for their
# kinds' packages (kinds/rating/models.py, kinds/pairwise/models.py). Their tables stay as they are: this
# migration only changes Django's state; the kinds' first migrations take the models over with the same tables.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("studies", "0017_authenticity_answers_and_sound"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="Rating"),
                migrations.DeleteModel(name="PairItem"),
                migrations.DeleteModel(name="PairwiseSettings"),
            ],
            database_operations=[],
        ),
    ]
