# The benchmark floor's table leaves the ratings app: the model now lives in bench/targets/ (its own
# migrations, installed only while BENCH_FLOOR_ENABLED=1). Production never wrote to it; benchmark runs use
# a database of their own, dropped afterwards, so no row is lost.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("ratings", "0001_floor_write"),
    ]

    operations = [
        migrations.DeleteModel(name="FloorWrite"),
    ]
