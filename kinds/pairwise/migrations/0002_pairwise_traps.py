from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('pairwise', '0001_pairwise_models_from_studies'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='pairitem',
            name='pair_item_prompt_once_per_participant',
        ),
        migrations.RemoveConstraint(
            model_name='pairitem',
            name='pair_item_pair_or_check',
        ),
        migrations.RemoveConstraint(
            model_name='pairitem',
            name='pair_item_answer_whole',
        ),
        migrations.AddField(
            model_name='pairitem',
            name='trap',
            field=models.CharField(blank=True, choices=[('', 'A pair or a known-answer pair'), ('repeat', "A consistency pair's second showing"), ('picture', 'The picture check')], default='', max_length=8),
        ),
        migrations.AddConstraint(
            model_name='pairitem',
            constraint=models.UniqueConstraint(condition=models.Q(('prompt__isnull', False), ('trap', '')), fields=('participant', 'prompt'), name='pair_item_prompt_once_per_participant'),
        ),
        migrations.AddConstraint(
            model_name='pairitem',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('good_on_left__isnull', True), ('known_answer__isnull', True), ('left__isnull', False), ('prompt__isnull', False), ('right__isnull', False), ('trap__in', ['', 'repeat']), models.Q(('left', models.F('right')), _negated=True)), models.Q(('good_on_left__isnull', False), ('known_answer__isnull', False), ('left__isnull', True), ('prompt__isnull', True), ('right__isnull', True), ('trap', '')), models.Q(('good_on_left__isnull', True), ('known_answer__isnull', True), ('left__isnull', True), ('prompt__isnull', True), ('right__isnull', True), ('trap', 'picture')), _connector='OR'), name='pair_item_pair_check_or_picture'),
        ),
        migrations.AddConstraint(
            model_name='pairitem',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('answered_at__isnull', True), ('choice', '')), models.Q(('answered_at__isnull', False), ('choice__in', ['left', 'right', 'tie'])), models.Q(('answered_at__isnull', False), ('choice', 'skip'), ('trap', 'picture')), _connector='OR'), name='pair_item_answer_whole'),
        ),
    ]
