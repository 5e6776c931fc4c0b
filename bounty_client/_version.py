"""The version of the client library."""

__version__ = "0.2.0"
