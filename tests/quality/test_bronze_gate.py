"""The bronze gate: a quarantine rate over the threshold stops the run before silver;
raising the threshold lets the next run continue from the landed data. Ends with the
report opened in real headless Chromium."""

from __future__ import annotations

import re
import shutil
import socketserver
import subprocess
import threading
import urllib.parse
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from pyspark_jobs.config import LakehouseConfig, load_config
from pyspark_jobs.quality import gx_context
from pyspark_jobs.quality.report import ACCOUNTING
from pyspark_jobs.settings import PROJECT_ROOT, Settings
from tests.conftest import reset_lake, samples_dir
from tests.quality.support import latest_run, report_text, run_logged

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = PROJECT_ROOT / "test-artifacts" / "quality"
SOURCE = {
    "name": "shop_debezium",
    "format": "debezium",
    "entities": [
        {
            "name": "shop.users",
            "table": "users",
            "key": ["USER_ID"],
            "columns": {
                "USER_ID": "bigint",
                "TAX_CODE": "string",
                "NAME": "string",
                "COINS": "bigint",
            },
        }
    ],
}


def write_config(
    folder: Path, landing: Path, quarantine_rate_max: float, results_kept: int = 100
) -> LakehouseConfig:
    """The one-source config; ``results_kept``: GX results kept per gate."""
    path = folder / "config" / "sources.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump(
            {
                "quality": {
                    "quarantine_rate_max": quarantine_rate_max,
                    "reject_rate_max": 0.01,
                    "data_docs_results_kept": results_kept,
                },
                "sources": [{**SOURCE, "landing": str(landing)}],
            }
        )
    )
    return load_config(path)


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Debezium samples plus one line that is not a record."""
    folder = tmp_path_factory.mktemp("bronze_gate")
    files = folder / "landing"
    files.mkdir()
    shutil.copy(samples_dir() / "debezium" / "shop.public.users.jsonl", files)
    (files / "broken.jsonl").write_text("this line is not a Kafka record\n")
    return folder


@pytest.fixture(scope="module")
def strict_run(spark: SparkSession, settings: Settings, landing: Path) -> tuple[int, str]:
    reset_lake(spark, settings)
    return run_logged(spark, settings, write_config(landing, landing / "landing", 0))


def test_quarantine_over_threshold_stops_before_silver(
    strict_run, spark: SparkSession, settings: Settings
):
    code, output = strict_run
    assert code == 1
    assert "bronze gate FAILED" in output
    assert "bronze.sources: quarantine_rate = 0, observed shop_debezium=0.125" in output
    run = latest_run(settings)
    assert run["status"] == "stopped by the bronze gate"
    assert list(run["gates"]) == ["bronze"]
    # silver never ran; bronze kept what it landed and what it quarantined
    assert not spark.catalog.tableExists("silver.change_log")
    assert spark.table("bronze.cdc_raw").count() == 7
    assert spark.table("bronze.cdc_quarantine").count() == 1
    assert "quarantine_rate" in report_text(settings)


def test_raised_threshold_lets_the_next_run_continue(
    strict_run,
    spark: SparkSession,
    settings: Settings,
    landing: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    assert strict_run[0] == 1
    failed_page = latest_run(settings)["gates"]["bronze"]["checkpoints"][0]["data_docs_page"]
    assert Path(failed_page).is_file()
    config = write_config(landing, landing / "landing", 0.5, results_kept=1)
    builds: list[tuple] = []
    real_build = gx_context.build_docs

    def counted_build(*args, **kwargs):
        builds.append(kwargs.get("suites", ()))
        return real_build(*args, **kwargs)

    monkeypatch.setattr(gx_context, "build_docs", counted_build)
    code, output = run_logged(spark, settings, config)
    assert code == 0, output
    run = latest_run(settings)
    assert {g: v["success"] for g, v in run["gates"].items()} == {
        "bronze": True,
        "silver": True,
        "gold": True,
    }
    # The three gates' Data Docs in one build, after the last gate, each page there.
    assert builds == [("bronze.sources", "silver.sources", "gold.tables")]
    assert "data docs" in run["timings"]
    for gate in run["gates"].values():
        assert Path(gate["checkpoints"][0]["data_docs_page"]).is_file()
    assert spark.table("bronze.cdc_raw").count() == 7  # nothing landed twice
    assert spark.table("gold.users").count() == 2
    # One result kept per gate: the failed run's validation and its page are gone, this
    # run's (which the report links) are there.
    context = gx_context.open_context(settings.reports_dir)
    bronze = [
        key.run_id.run_name
        for key in context.validation_results_store.list_keys()
        if key.expectation_suite_identifier.name == "bronze.sources"
    ]
    assert bronze == [run["run_id"]]
    assert not Path(failed_page).exists()
    assert Path(run["gates"]["bronze"]["checkpoints"][0]["data_docs_page"]).is_file()


class RecordingProxy(socketserver.ThreadingTCPServer):
    """The only network Chromium gets: a proxy on loopback that records every request and
    answers none, so a page that needs anything off the machine is seen (and breaks)."""

    daemon_threads = True

    def __init__(self) -> None:
        self.requests: list[str] = []
        proxy = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                line = self.rfile.readline(2048).decode("latin-1").strip()
                if line:
                    proxy.requests.append(line)
                self.wfile.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


# Chromium's own update, clock and sign-in checks, which no flag turns off in headless mode:
# the browser's traffic, not a page's.
BROWSER_OWN = {"update.googleapis.com", "clients2.google.com", "accounts.google.com"}


def requested_hosts(proxy: RecordingProxy) -> list[str]:
    """Hosts the pages asked the proxy for (``CONNECT host:443`` or ``GET http://host/``)."""
    hosts = []
    for line in proxy.requests:
        target = line.split()[1] if len(line.split()) > 1 else line
        host = urllib.parse.urlsplit(target if "//" in target else f"//{target}").hostname
        if host not in BROWSER_OWN:
            hosts.append(host or target)
    return hosts


@pytest.fixture
def offline_proxy():
    proxy = RecordingProxy()
    yield proxy
    proxy.shutdown()
    proxy.server_close()


def chromium(*args: str, profile: Path, proxy: RecordingProxy) -> subprocess.CompletedProcess[str]:
    """Headless Chromium with no network but the recording proxy (no DNS either)."""
    return subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-features=OptimizationHints,MediaRouter,Translate,AutofillServerCommunication",
            "--disable-extensions",
            "--disable-default-apps",
            "--disable-domain-reliability",
            "--disable-client-side-phishing-detection",
            "--no-pings",
            f"--proxy-server=http://127.0.0.1:{proxy.server_address[1]}",
            "--proxy-bypass-list=<-loopback>",
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
            "--virtual-time-budget=5000",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )


def local_assets(page: Path) -> list[str]:
    """Every stylesheet and script a page loads; each must be a file beside it."""
    html = page.read_text(encoding="utf-8")
    assets = re.findall(r'<(?:link[^>]*\shref|script[^>]*\ssrc)="([^"#]+)"', html)
    for asset in assets:
        assert "//" not in asset, (page, asset)
        assert (page.parent / urllib.parse.unquote(asset)).resolve().is_file(), (page, asset)
    return assets


@pytest.mark.browser
def test_report_renders_offline_in_headless_chromium(
    strict_run, settings: Settings, tmp_path: Path, offline_proxy: RecordingProxy
):
    """The report and the Data Docs it links, opened with the network off: charts,
    observed values and thresholds, bronze -> silver numbers that add up, the drill-down
    with a quarantined line and its reason, and links straight to styled Data Docs pages;
    nothing requested off the machine. Screenshots go to test-artifacts/quality/."""
    assert CHROMIUM.exists(), "run `make setup-test` (scripts/install_chromium.sh)"
    profile = tmp_path / "profile"
    # the net is armed: a page that fetches from the network is seen
    control = tmp_path / "remote.html"
    control.write_text('<img src="https://cdn.example.invalid/x.png">')
    chromium("--dump-dom", control.as_uri(), profile=profile, proxy=offline_proxy)
    assert "cdn.example.invalid" in requested_hosts(offline_proxy)
    offline_proxy.requests.clear()

    page = settings.reports_dir / "index.html"
    dom = chromium("--dump-dom", page.as_uri(), profile=profile, proxy=offline_proxy).stdout
    run = latest_run(settings)

    for chart in ("chart-run-time", "chart-sources", "chart-freshness"):
        assert re.search(rf'<figure id="{chart}"><svg', dom), chart
    assert "Freshness per gold table" in dom and "gold.users" in dom
    for layer in ("bronze", "silver", "gold"):
        assert f'id="gate-{layer}"' in dom
    assert "run succeeded" in dom and "stopped by the bronze gate" in dom  # trend of 2 runs
    # every check with what it observed and its threshold (here: shop_debezium's 1 of 8)
    drill = dom[dom.index('id="source-shop_debezium"') :]
    drill = drill[: drill.index("</details>")]
    assert re.search(r"quarantine_rate</td><td[^>]*>0\.125</td><td[^>]*>≤ 0\.5</td>", drill)
    assert re.search(r"unaccounted</td><td[^>]*>0</td><td[^>]*>= 0</td>", drill)
    (silver,) = [r for r in run["gates"]["silver"]["checkpoints"][0]["rows"]]
    terms = " + ".join(f"{silver[c]} {c}" for c in ACCOUNTING)
    assert f"{silver['bronze_records']} bronze records = {terms}" in drill
    assert silver["bronze_records"] == 7 and silver["noops"] == 1  # the tombstone, shown
    # a sample quarantined line with its reason
    assert "this line is not a Kafka record" in drill and "Quarantined lines" in drill
    assert 'id="table-gold.users"' in dom

    # links straight to each validation's page, named with this run and its data asset
    links = re.findall(r'<a class="docs-link" href="([^"]+)"', dom)
    assert len(links) == 3
    docs_pages = [settings.reports_dir / urllib.parse.unquote(link) for link in links]
    for docs_page, layer in zip(docs_pages, ("bronze", "silver", "gold"), strict=True):
        assert docs_page.is_file() and f"/{run['run_id']}/" in docs_page.as_posix()
        local_assets(docs_page)
        docs_dom = chromium(
            "--dump-dom", docs_page.as_uri(), profile=profile, proxy=offline_proxy
        ).stdout
        checkpoint = run["gates"][layer]["checkpoints"][0]
        assert checkpoint["name"] in docs_dom and checkpoint["asset"] in docs_dom
        assert run["run_id"] in docs_dom
    # the Data Docs index lists the results: drawn by the vendored bootstrap-table
    index = settings.reports_dir / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"
    assert any("bootstrap.min.css" in a for a in local_assets(index))
    index_dom = chromium("--dump-dom", index.as_uri(), profile=profile, proxy=offline_proxy).stdout
    assert "bootstrap-table" in index_dom and "bronze.sources" in index_dom
    assert "gold.tables" in index_dom and run["run_id"] in index_dom
    suite_page = index.parent / "expectations" / "bronze" / "sources.html"
    assert suite_page.is_file() and local_assets(suite_page)

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for name, url in (("report.png", page.as_uri()), ("data-docs.png", docs_pages[0].as_uri())):
        shot = ARTIFACTS / name
        shot.unlink(missing_ok=True)
        size = "--window-size=1280,4200" if name == "report.png" else "--window-size=1280,1600"
        chromium(f"--screenshot={shot}", size, url, profile=profile, proxy=offline_proxy)
        assert shot.stat().st_size > 10_000
    assert requested_hosts(offline_proxy) == []  # nothing off the machine, on any page
