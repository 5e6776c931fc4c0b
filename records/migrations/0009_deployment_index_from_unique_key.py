"""Record tables drop their single-column deployment index: each unique (deployment, ID) constraint
leads with the deployment and serves the same look-ups, so it only cost writes."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('records', '0008_deployment_in_chain_order'),
    ]

    operations = [
        migrations.AlterField(
            model_name='bounty',
            name='deployment',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='records.deployment'),
        ),
        migrations.AlterField(
            model_name='dispute',
            name='deployment',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='records.deployment'),
        ),
        migrations.AlterField(
            model_name='submission',
            name='deployment',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='records.deployment'),
        ),
    ]
