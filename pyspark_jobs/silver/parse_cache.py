"""dbt's parse of the project, kept across builds and lakes, so a build skips a full parse.

Before every command dbt parses the project (13 models, 31 data tests, 532 macros) and
saves the result in its target folder (``partial_parse.msgpack``); the next command
reuses it and parses again only the files that changed, but only when its command-line
vars, profile and target are those of the saved parse. The pipeline's target folder is in
the lake (``Settings.dbt_dir``), so a new lake's first build parsed everything, and so did
every build whose vars differ from the build before (a full build, then an incremental
one; another set of formats with new rows): 2.7 to 3.9 s where a partial parse takes 0.6
to 1.2 s (dbt's logs of a ``make test``, 2026-12-02).

Here the last parse saved for each set of vars is kept in ``.cache/dbt-parse/``, named
after the vars, the target and dbt's version, and put in the lake's target folder before
dbt runs. dbt checks that file as it checks its own (version, vars, profile, the
checksum of every project file, the env vars each file read) and parses again whatever
differs, so a stale file costs time, never a wrong build. The cache is an optimisation
only: any error reading or writing it is ignored, and deleting the folder is safe.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from pyspark_jobs.settings import PROJECT_ROOT
from pyspark_jobs.storage import replace_local_bytes

CACHE_DIR = PROJECT_ROOT / ".cache" / "dbt-parse"
# dbt's own name for the saved parse in its target folder.
PARSE_FILE = "partial_parse.msgpack"
# Builds on a large bronze pass the bronze version they start from, so their vars (and
# their cache entries) are new every time: the newest entries are kept, the rest deleted.
KEEP = 24


def parse_key(args: Sequence[str], target: str) -> str:
    """The name of the saved parse that fits a dbt command: its vars (as dbt compares
    them, whatever their order), the profile target and dbt's version."""
    given = list(args)
    index = given.index("--vars") if "--vars" in given else -1
    variables = json.loads(given[index + 1]) if 0 <= index < len(given) - 1 else {}
    text = json.dumps(
        [variables, target, metadata.version("dbt-core")], sort_keys=True, default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def restore(target_dir: Path, key: str, cache_dir: Path = CACHE_DIR) -> bool:
    """Put the saved parse named ``key`` in dbt's target folder; whether there was one."""
    try:
        data = (cache_dir / f"{key}.msgpack").read_bytes()
        replace_local_bytes(target_dir / PARSE_FILE, data)
    except OSError:
        return False
    return True


def keep(target_dir: Path, key: str, cache_dir: Path = CACHE_DIR) -> None:
    """Save the parse dbt left in its target folder under ``key``, then delete all but the
    newest ``KEEP`` saved parses."""
    try:
        replace_local_bytes(cache_dir / f"{key}.msgpack", (target_dir / PARSE_FILE).read_bytes())
        saved = sorted(
            cache_dir.glob("*.msgpack"), key=lambda path: path.stat().st_mtime, reverse=True
        )
        for old in saved[KEEP:]:
            old.unlink(missing_ok=True)
    except OSError:
        return
