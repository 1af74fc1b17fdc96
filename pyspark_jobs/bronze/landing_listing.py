"""Whether a landing folder has anything its file source's checkpoint has not processed.

Starting a Structured Streaming query only to find no new file costs seconds per source.
``ingest`` instead compares a signature of the folder's listing with the one it stored in
the source's checkpoint after the last run that completed, and starts no query when they
match.

Why that is safe: the stored signature was computed *before* that run's query started, and
an ``availableNow`` query reads every file listed at its start, so every file of the stored
listing was processed. A file landing during the run is not in it, so the next run sees a
different listing. The signature is only replaced after a query ended on its own without
error; a kill at any point leaves the previous one (or none), which only means the next run
starts its query. It lives in the checkpoint, so resetting the checkpoint drops it too.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from pyspark_jobs.bronze.readers import LANDING_GLOB
from pyspark_jobs.settings import is_uri
from pyspark_jobs.storage import replace_local_text

__all__ = ["SIGNATURE_FILE", "Listing", "list_landing", "nothing_new", "record_signature"]

SIGNATURE_FILE = "lakehouse_landing_listing"
# Bumped whenever what the signature covers changes, so an old one never matches.
_VERSION = 1


@dataclass(frozen=True)
class Listing:
    """A landing folder's listing: its signature, and the bytes of the files it covers."""

    signature: str
    total_bytes: int


def list_landing(folder: Path) -> Listing | None:
    """The folder's listing as the file source reads it, or None if unlistable.

    The signature is a hash of the folder itself and the sorted (relative path, size,
    mtime_ns) of every file under it matching ``LANDING_GLOB``, as the reader's
    ``pathGlobFilter`` and ``recursiveFileLookup`` do. It includes the hidden (``.``/``_``)
    files Spark leaves out: one more file only means one more query started, never one
    skipped. ``total_bytes`` is the size of the same files.
    """
    entries: list[tuple[str, int, int]] = []
    seen_folders: set[tuple[int, int]] = set()

    def fail(error: OSError) -> None:
        raise error

    try:
        # Spark lists through symlinked folders; a symlink loop is listed once.
        for here, folders, files in os.walk(folder, onerror=fail, followlinks=True):
            info = os.stat(here)
            if (info.st_dev, info.st_ino) in seen_folders:
                folders.clear()
                continue
            seen_folders.add((info.st_dev, info.st_ino))
            for name in files:
                if not fnmatch.fnmatchcase(name, LANDING_GLOB):
                    continue
                path = os.path.join(here, name)
                try:
                    stat = os.stat(path)
                except FileNotFoundError:
                    continue  # removed (or a dangling link): not a file Spark can read
                relative = Path(os.path.relpath(path, folder)).as_posix()
                entries.append((relative, stat.st_size, stat.st_mtime_ns))
        root = str(folder.resolve())
    except OSError:
        return None
    # JSON keeps odd names (newlines, undecodable bytes) unambiguous.
    text = json.dumps([_VERSION, root, LANDING_GLOB, sorted(entries)])
    signature = hashlib.sha256(text.encode()).hexdigest()
    return Listing(signature, sum(size for _, size, _ in entries))


def nothing_new(checkpoint: str, signature: str) -> bool:
    """Whether the query of this checkpoint would find nothing to read.

    True when the checkpoint is a local folder holding this same signature and no batch
    planned but not committed (one that a restarted query would replay). A checkpoint given
    as a URI is never judged: its source always starts a query.
    """
    if is_uri(checkpoint):
        return False
    folder = Path(checkpoint)
    try:
        stored = (folder / SIGNATURE_FILE).read_text().strip()
        at_rest = _last_batch(folder / "offsets") == _last_batch(folder / "commits")
    except OSError:
        return False
    return stored == signature and at_rest


def record_signature(checkpoint: str, signature: str) -> None:
    """Store the signature in a local checkpoint, whole or not at all; a URI is left alone.

    Call it only after the query ended on its own without error, with the signature
    computed before that query started.
    """
    if is_uri(checkpoint):
        return
    replace_local_text(Path(checkpoint) / SIGNATURE_FILE, signature + "\n")


def _last_batch(log: Path) -> int | None:
    """The highest batch id in one of Spark's metadata logs (``offsets``, ``commits``)."""
    try:
        names = os.listdir(log)
    except FileNotFoundError:
        return None
    return max((int(name) for name in names if name.isascii() and name.isdigit()), default=None)
