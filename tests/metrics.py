"""Reading Prometheus metrics in tests: a scrape's samples, and the value of one series."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels` (0 when there is none)."""
    return sum(v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls)
