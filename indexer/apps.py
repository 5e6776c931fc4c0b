from django.apps import AppConfig


class IndexerAppConfig(AppConfig):
    name = "indexer"
    verbose_name = "Chain indexer"
