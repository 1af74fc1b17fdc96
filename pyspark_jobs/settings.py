"""Where the lake lives and which Spark to talk to, resolved from the environment.

Everything environment-specific comes from here (flags override environment variables,
which override the defaults); nothing else in the package reads ``os.environ``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = PROJECT_ROOT / "config" / "sources.yml"


@dataclass(frozen=True)
class Settings:
    """Runtime locations and the Spark master.

    >>> Settings.from_env({"LAKEHOUSE_ROOT": "/tmp/lake"}).warehouse_dir
    PosixPath('/tmp/lake/warehouse')
    """

    lake_root: Path
    master: str
    config_path: Path
    shuffle_partitions: int = 4
    # The driver JVM's heap (local mode: the whole of Spark's memory).
    driver_memory: str = "2g"

    @property
    def warehouse_dir(self) -> Path:
        return self.lake_root / "warehouse"

    @property
    def metastore_dir(self) -> Path:
        return self.lake_root / "metastore_db"

    @property
    def checkpoint_dir(self) -> Path:
        return self.lake_root / "checkpoints"

    @property
    def state_dir(self) -> Path:
        """Run summaries, locks and other small files the pipeline keeps beside the tables."""
        return self.lake_root / "_state"

    @property
    def reports_dir(self) -> Path:
        return self.lake_root / "reports"

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        return cls(
            lake_root=Path(env.get("LAKEHOUSE_ROOT", PROJECT_ROOT / "lake")).resolve(),
            master=env.get("LAKEHOUSE_SPARK_MASTER", "local[*]"),
            config_path=Path(env.get("LAKEHOUSE_CONFIG", DEFAULT_CONFIG)).resolve(),
            shuffle_partitions=int(env.get("LAKEHOUSE_SHUFFLE_PARTITIONS", "4")),
            driver_memory=env.get("LAKEHOUSE_DRIVER_MEMORY", "2g"),
        )

    def with_overrides(
        self,
        lake_root: str | Path | None = None,
        master: str | None = None,
        config_path: str | Path | None = None,
    ) -> Settings:
        """Return a copy with the CLI flags that were given applied."""
        changes: dict[str, object] = {}
        if lake_root is not None:
            changes["lake_root"] = Path(lake_root).resolve()
        if master is not None:
            changes["master"] = master
        if config_path is not None:
            changes["config_path"] = Path(config_path).resolve()
        return replace(self, **changes)  # type: ignore[arg-type]
