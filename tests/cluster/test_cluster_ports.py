"""The loopback cluster's ports: picked out of the way of outgoing connections, and where a
daemon still had to move, found where it went (CI: the master's port was taken between
picking and binding, the master moved one up, the workers never found it)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.test_cluster_pipeline import cluster_script
from tests.conftest import SHORT_JVM_OPTIONS

# The master's lines of that CI run, as Spark 4.2 wrote them (less their time stamps).
MOVED_MASTER_LOG = """\
WARN Utils: Service 'sparkMaster' could not bind on port 41043. Attempting port 41044.
INFO Utils: Successfully started service 'sparkMaster' on port 41044.
INFO Master: Starting Spark master at spark://127.0.0.1:41044
INFO Master: Running Spark version 4.2.0
INFO JettyUtils: Start Jetty 127.0.0.1:57415 for MasterUI
INFO Utils: Successfully started service 'MasterUI' on port 57415.
INFO MasterWebUI: Bound MasterWebUI to 127.0.0.1, and started at http://localhost:57415
"""


def test_the_master_is_found_where_its_log_says_it_went() -> None:
    script = cluster_script()
    assert script.master_addresses(MOVED_MASTER_LOG) == ("spark://127.0.0.1:41044", 57415)
    # Not before it has reported both.
    assert script.master_addresses(MOVED_MASTER_LOG.split("INFO Master: Running")[0]) is None
    assert script.master_addresses("") is None


def test_picked_ports_are_free_distinct_and_below_the_ephemeral_range() -> None:
    script = cluster_script()
    ports = [script.free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    assert all(script.PORT_FLOOR <= p < script.ephemeral_floor() for p in ports)
    for port in ports[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def listening(count: int) -> Iterator[socket.socket]:
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s


@pytest.mark.cluster
def test_a_master_whose_ports_were_taken_still_gets_its_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = cluster_script()
    taken = list(listening(2))
    # The master's port and its web UI's, as free_port picks them first, taken by the time
    # the master binds.
    first_picks = iter(s.getsockname()[1] for s in taken)
    picker = script.free_port
    monkeypatch.setattr(script, "free_port", lambda: next(first_picks, None) or picker())
    cluster = script.Cluster(tmp_path / "run", SHORT_JVM_OPTIONS)
    cluster.dir.mkdir()
    try:
        url = cluster.start_spark(workers=1, cores=1, memory="512m")
        taken_ports = {s.getsockname()[1] for s in taken}
        assert int(url.rsplit(":", 1)[1]) not in taken_ports
        assert cluster.state["master"]["webui_port"] not in taken_ports
        workers = cluster.master_json()["workers"]
        assert [w["state"] for w in workers] == ["ALIVE"]
    finally:
        for s in taken:
            s.close()
        cluster.stop()
    assert script.marked_processes(cluster.dir, None) == []
