"""The 32 EmpatheticDialogues emotion labels, with the valence groups of Welivita & Pu (2024).

The grouping is data: edit it in the admin (other papers put nostalgic and sentimental elsewhere).
"""

from django.db import migrations

POSITIVE = [
    "anticipating",
    "caring",
    "confident",
    "content",
    "excited",
    "faithful",
    "grateful",
    "hopeful",
    "impressed",
    "joyful",
    "prepared",
    "proud",
    "surprised",
    "trusting",
]
NEGATIVE = [
    "afraid",
    "angry",
    "annoyed",
    "anxious",
    "apprehensive",
    "ashamed",
    "devastated",
    "disappointed",
    "disgusted",
    "embarrassed",
    "furious",
    "guilty",
    "jealous",
    "lonely",
    "nostalgic",
    "sad",
    "sentimental",
    "terrified",
]


def seed_emotions(apps, schema_editor):
    Emotion = apps.get_model("studies", "Emotion")
    for names, valence in ((POSITIVE, "positive"), (NEGATIVE, "negative")):
        for name in names:
            # An emotion someone already created keeps the valence they gave it.
            Emotion.objects.get_or_create(name=name, defaults={"valence": valence})


def unseed_emotions(apps, schema_editor):
    Emotion = apps.get_model("studies", "Emotion")
    Emotion.objects.filter(name__in=POSITIVE + NEGATIVE, prompts__isnull=True).delete()


class Migration(migrations.Migration):
    dependencies = [("studies", "0001_initial")]

    operations = [migrations.RunPython(seed_emotions, unseed_emotions)]
