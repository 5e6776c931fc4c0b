from django.apps import AppConfig


class RecordsAppConfig(AppConfig):
    name = "records"
    verbose_name = "Bounty records"

    def ready(self) -> None:
        from records import checks  # noqa: F401 (registers the deployment checks)
