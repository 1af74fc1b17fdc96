"""Where the lake lives and which Spark to talk to, resolved from the environment.

Everything environment-specific comes from here (flags override environment variables,
which override the defaults); nothing else in the package reads ``os.environ``.

The lake root is a folder (the embedded default: ``./lake``) or a URI (``file:///...``,
and on a cluster ``s3a://``, ``abfss://``, ``gs://``). Tables, checkpoints and the lock
table live under it and are only ever reached through Spark, so any Hadoop file system
works. A few files belong to the driver's host and stay on its local disk (``local_dir``):
the embedded Derby metastore, run summaries, reports, dbt's target folder and the Hive
client's resources folder (empty unless a query adds a remote jar or file). For a lake
folder or a ``file:`` URI they sit in the lake's own folder, as they always did.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import unquote, urlparse

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = PROJECT_ROOT / "config" / "sources.yml"
# Driver-side files of a lake that is not on this host's disk (s3a://, abfss://, gs://).
DEFAULT_REMOTE_LOCAL_DIR = PROJECT_ROOT / "lake-local"

# "s3a://bucket/lake", "file:///tmp/lake": a scheme of two or more letters (so that a
# Windows-like "C:/x" is not one), then a colon.
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
LOCK_MODES = ("host", "lake")


class SettingsError(ValueError):
    """A setting that cannot be used; the message names where it came from."""


def is_uri(location: str | Path) -> bool:
    """Whether ``location`` is a URI rather than a local path.

    >>> is_uri("s3a://bucket/lake"), is_uri("file:///tmp/lake"), is_uri("/tmp/lake")
    (True, True, False)
    """
    return isinstance(location, str) and bool(_URI.match(location))


def join_location(root: str | Path, *parts: str) -> str:
    """``root`` and ``parts`` joined with ``/``: a path for a folder, a URI for a URI.

    >>> join_location("s3a://bucket/lake/", "warehouse"), join_location(Path("/l"), "a", "b")
    ('s3a://bucket/lake/warehouse', '/l/a/b')
    """
    if isinstance(root, Path):
        return str(root.joinpath(*parts))
    return "/".join([root.rstrip("/"), *parts])


def _lake_root(value: str | Path) -> Path | str:
    """A folder becomes an absolute ``Path``; a URI stays text (trailing ``/`` removed).

    A lake on this host's disk must be a folder or not exist yet: a file there (or a file
    in its path) is refused now, before anything is written beside it.
    """
    if isinstance(value, Path) or not is_uri(value):
        folder = Path(value).resolve()
        _refuse_file(folder, str(value))
        return folder
    parsed = urlparse(value)
    if parsed.scheme == "file" and not parsed.path.startswith("/"):
        raise SettingsError(f"lake root {value!r}: a file: URI needs an absolute path")
    if parsed.scheme == "file":
        _refuse_file(Path(unquote(parsed.path)), value)
    return value.rstrip("/") if parsed.path not in ("", "/") else value


def _refuse_file(folder: Path, given: str) -> None:
    """Raise unless ``folder`` is a folder or can become one (its nearest existing
    ancestor is a folder)."""
    for existing in (folder, *folder.parents):
        if existing.exists():
            if not existing.is_dir():
                found = "it is a file" if existing == folder else f"{existing} is a file"
                raise SettingsError(f"lake root {given!r}: expected a folder, {found}")
            return


def expand_vars(text: str, environ: Mapping[str, str], where: str) -> str:
    """Replace ``${VAR}`` with the environment's value (how secrets reach the settings).

    >>> expand_vars("pw=${PW}", {"PW": "s3cret"}, "x")
    'pw=s3cret'
    """

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise SettingsError(f"{where}: environment variable {name} is not set")
        return environ[name]

    return _VAR.sub(value, text)


def parse_conf_pair(text: str, where: str = "--conf") -> tuple[str, str]:
    """``KEY=VALUE`` as given to ``--conf`` (the value may itself hold ``=``).

    >>> parse_conf_pair("spark.executor.memory=2g")
    ('spark.executor.memory', '2g')
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key.startswith("spark."):
        raise SettingsError(f"{where}: expected spark.KEY=VALUE, got {text!r}")
    return key, value.strip()


def read_spark_defaults(path: Path, environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """The settings of a spark-defaults style file, in file order.

    One setting a line, ``key value`` (whitespace between) or ``key=value``; ``#`` starts
    a comment line. ``${VAR}`` is read from the environment, so a committed file can name
    a secret without holding it.
    """
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise SettingsError(f"spark defaults file {path}: {exc.strerror or exc}") from None
    pairs = []
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path}:{number}"
        match = re.match(r"^(\S+?)(?:\s*=\s*|\s+)(.*)$", line)
        if match is None or not match.group(1).startswith("spark."):
            raise SettingsError(f"{where}: expected 'spark.KEY VALUE', got {line!r}")
        pairs.append((match.group(1), expand_vars(match.group(2).strip(), environ, where)))
    return pairs


@dataclass(frozen=True)
class Settings:
    """Runtime locations, the Spark master and the Spark settings given from outside.

    >>> Settings.from_env({"LAKEHOUSE_ROOT": "/tmp/lake"}).warehouse_dir
    '/tmp/lake/warehouse'
    >>> Settings.from_env({"LAKEHOUSE_ROOT": "s3a://bucket/lake"}).checkpoint_dir
    's3a://bucket/lake/checkpoints'
    """

    lake_root: Path | str
    # A master URL; "" keeps the one the JVM was launched with (spark-submit --master).
    master: str
    config_path: Path
    shuffle_partitions: int = 4
    # The driver JVM's heap (local mode: the whole of Spark's memory).
    driver_memory: str = "2g"
    # More flags for the driver JVM, added after the others (docs/operations.md): e.g.
    # -XX:TieredStopAtLevel=1, cheaper for a short command on small data.
    driver_java_options: str = ""
    # A process that keeps its session warm for cycles (`--every`): its driver collects
    # garbage with Parallel, a one-shot command's with the JVM's default (session.py).
    long_lived: bool = False
    # Spark settings from a spark-defaults file, then from --conf: they override the
    # project's own (see session.spark_conf), later ones win.
    extra_conf: tuple[tuple[str, str], ...] = ()
    # The target of the committed dbt profile that `lakehouse silver` builds with:
    # `local` (in-process, the pipeline's own session) or `thrift` (a Spark Thrift Server).
    dbt_target: str = "local"
    # Driver-side files (see the module doc); None: the default for the lake root.
    local_root: Path | None = None
    # "host": fcntl locks in local_dir (one host; taken before Spark starts);
    # "lake": a lock table in the lake (any number of hosts). None: host for a lake
    # folder, lake for a lake URI.
    locks: str | None = None
    # Seconds a lake lock stays valid without its holder renewing it (a crashed holder's
    # lock is free after this long).
    lock_lease_seconds: float = 600.0
    # The Python the Spark workers of a local master run (the one Python UDF, the
    # document patch fold, imports pyspark_jobs there): this interpreter, whose
    # environment has the project installed, unless PYSPARK_PYTHON names another.
    worker_python: str = sys.executable

    def __post_init__(self) -> None:
        object.__setattr__(self, "lake_root", _lake_root(self.lake_root))
        if self.locks is not None and self.locks not in LOCK_MODES:
            raise SettingsError(f"locks: expected one of {LOCK_MODES}, got {self.locks!r}")

    # -- the lake (shared storage, reached through Spark) ------------------------------

    @property
    def lake_is_uri(self) -> bool:
        return isinstance(self.lake_root, str)

    def lake_location(self, *parts: str) -> str:
        """A location under the lake root, as Spark takes it."""
        return join_location(self.lake_root, *parts)

    @property
    def warehouse_dir(self) -> str:
        return self.lake_location("warehouse")

    @property
    def checkpoint_dir(self) -> str:
        return self.lake_location("checkpoints")

    @property
    def lock_table_location(self) -> str:
        """The Delta table of lake locks (``locks == "lake"``)."""
        return self.lake_location("_state", "lake_locks")

    @property
    def lock_mode(self) -> str:
        if self.locks is not None:
            return self.locks
        return "lake" if self.lake_is_uri else "host"

    # -- the driver's host ------------------------------------------------------------

    @property
    def local_dir(self) -> Path:
        """Driver-side files: the lake folder itself when the lake is on this disk."""
        if self.local_root is not None:
            return self.local_root
        if isinstance(self.lake_root, Path):
            return self.lake_root
        parsed = urlparse(self.lake_root)
        if parsed.scheme == "file":
            return Path(unquote(parsed.path))
        return DEFAULT_REMOTE_LOCAL_DIR

    @property
    def metastore_dir(self) -> Path:
        """The embedded Derby metastore (unless the Spark settings name another)."""
        return self.local_dir / "metastore_db"

    @property
    def hive_resources_dir(self) -> Path:
        """The Hive client's resources folder, shared by every run (Hive's default is a
        new ``<session id>_resources`` folder in the JVM's temp folder, never removed)."""
        return self.local_dir / "hive_resources"

    @property
    def state_dir(self) -> Path:
        """Run summaries and host locks: small files the pipeline keeps on the driver's host."""
        return self.local_dir / "_state"

    @property
    def reports_dir(self) -> Path:
        return self.local_dir / "reports"

    @property
    def dbt_dir(self) -> Path:
        """dbt's target and log folders."""
        return self.local_dir / "dbt"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        defaults_file = env.get("LAKEHOUSE_SPARK_DEFAULTS")
        extra = read_spark_defaults(Path(defaults_file), env) if defaults_file else []
        local_dir = env.get("LAKEHOUSE_LOCAL_DIR")
        return cls(
            lake_root=env.get("LAKEHOUSE_ROOT", str(PROJECT_ROOT / "lake")),
            # Under spark-submit (its JVM is up before Python: PYSPARK_GATEWAY_PORT), the
            # master is spark-submit's --master unless LAKEHOUSE_SPARK_MASTER says otherwise.
            master=env.get(
                "LAKEHOUSE_SPARK_MASTER", "" if "PYSPARK_GATEWAY_PORT" in env else "local[*]"
            ),
            config_path=Path(env.get("LAKEHOUSE_CONFIG", DEFAULT_CONFIG)).resolve(),
            shuffle_partitions=int(env.get("LAKEHOUSE_SHUFFLE_PARTITIONS", "4")),
            driver_memory=env.get("LAKEHOUSE_DRIVER_MEMORY", "2g"),
            driver_java_options=env.get("LAKEHOUSE_DRIVER_JAVA_OPTIONS", "").strip(),
            extra_conf=tuple(extra),
            dbt_target=env.get("LAKEHOUSE_DBT_TARGET", "local"),
            local_root=Path(local_dir).resolve() if local_dir else None,
            locks=env.get("LAKEHOUSE_LOCKS") or None,
            lock_lease_seconds=float(env.get("LAKEHOUSE_LOCK_LEASE_SECONDS", "600")),
            worker_python=env.get("PYSPARK_PYTHON") or sys.executable,
        )

    def with_overrides(
        self,
        lake_root: str | Path | None = None,
        master: str | None = None,
        config_path: str | Path | None = None,
        spark_defaults: str | Path | None = None,
        conf: Sequence[str] = (),
        dbt_target: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Settings:
        """Return a copy with the CLI flags that were given applied.

        ``spark_defaults`` (a file) and ``conf`` (``KEY=VALUE`` texts) add to the Spark
        settings already there, in that order.
        """
        changes: dict[str, object] = {}
        if lake_root is not None:
            changes["lake_root"] = lake_root
        if master is not None:
            changes["master"] = master
        if config_path is not None:
            changes["config_path"] = Path(config_path).resolve()
        if dbt_target is not None:
            changes["dbt_target"] = dbt_target
        extra: list[tuple[str, str]] = []
        if spark_defaults is not None:
            env = os.environ if environ is None else environ
            extra += read_spark_defaults(Path(spark_defaults), env)
        extra += [parse_conf_pair(text) for text in conf]
        if extra:
            changes["extra_conf"] = self.extra_conf + tuple(extra)
        return replace(self, **changes)  # type: ignore[arg-type]

    def with_conf(self, pairs: Iterable[tuple[str, str]]) -> Settings:
        """A copy with more Spark settings (they win over the ones already there)."""
        return replace(self, extra_conf=self.extra_conf + tuple(pairs))
