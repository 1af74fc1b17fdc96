"""The inputs every fold takes, whatever its family."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame


@dataclass(frozen=True)
class FoldInputs:
    """What one family's fold reads, for all its tables at once (``table_name`` in each).

    - ``changes``: the change-log rows not applied yet (the re-fold families use their
      ``change_id`` to mark affected keys, including keys of other tables of the source);
    - ``current``: the gold rows of the family's tables as the folds see them
      (``gold.images.current_images``);
    - ``tombstones``: ``lakehouse.gold_tombstones`` rows of those tables;
    - ``specs``: ``table_specs.specs_frame`` of those tables;
    - ``types``: every declared column type of those tables (values compare as these);
    - ``histories``: ``table_name``, ``_record_key``, ``h``: the sorted full history
      (``events.sorted_history``) of every key with a new event, as of the version
      being applied: every affected key for the re-fold families, the keys of the
      ``history: true`` tables for the others (SCD2 versions); None when not needed.
    """

    changes: DataFrame
    current: DataFrame
    tombstones: DataFrame
    specs: DataFrame
    types: tuple[str, ...]
    histories: DataFrame | None = None
