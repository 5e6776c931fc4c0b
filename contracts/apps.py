from django.apps import AppConfig


class ContractsAppConfig(AppConfig):
    name = "contracts"
    verbose_name = "Reference contracts and the dev chain"
