from django.apps import AppConfig


class IndexerConfig(AppConfig):
    name = "indexer"
    verbose_name = "Chain indexer"
