"""cdc-lakehouse: CDC streams from many databases into current-state Delta Lake tables."""

__version__ = "0.1.0"
