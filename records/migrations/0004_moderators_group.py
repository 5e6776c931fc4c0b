"""The Moderators group, with exactly the permissions moderators need: view the mirrored
records and the review queue, read and add notes. Nothing else: no change or delete anywhere."""

from django.contrib.auth.management import create_permissions
from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

GROUP = "Moderators"
PERMISSIONS = [
    "view_bounty",
    "view_submission",
    "view_dispute",
    "view_disputereviewqueue",
    "view_moderatornote",
    "add_moderatornote",
]


def create_group(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    # Permissions are normally created after all migrations; make sure they exist now (the
    # historical app config has no models module, which create_permissions insists on).
    app_config = apps.get_app_config("records")
    app_config.models_module = True  # type: ignore[attr-defined]
    create_permissions(app_config, verbosity=0, apps=apps)
    app_config.models_module = None  # type: ignore[attr-defined]
    group_model = apps.get_model("auth", "Group")
    permission_model = apps.get_model("auth", "Permission")
    group, _ = group_model.objects.get_or_create(name=GROUP)
    group.permissions.set(
        permission_model.objects.filter(content_type__app_label="records", codename__in=PERMISSIONS)
    )


def delete_group(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    apps.get_model("auth", "Group").objects.filter(name=GROUP).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("records", "0003_moderation"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]
    operations = [migrations.RunPython(create_group, delete_group)]
