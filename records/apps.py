from django.apps import AppConfig


class RecordsAppConfig(AppConfig):
    name = "records"
    verbose_name = "Bounty records"
