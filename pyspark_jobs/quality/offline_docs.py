"""Make GX Data Docs work offline: every page's CSS, scripts, fonts and logo from the site.

GX's page templates load Bootstrap, jQuery, bootstrap-table, Font Awesome and more from
CDNs, and the navbar logo from a web bucket. Offline (as many data platforms are) the
pages then render unstyled and the index's results list stays empty (it is drawn by
bootstrap-table). The templates cannot be overridden (GX's own loader comes first), so
after each Data Docs build the fresh pages are rewritten: each CDN asset points to the
same version vendored in ``data_docs_vendor/`` (copied to ``static/vendor/`` of the site;
licenses in ``data_docs_vendor/licenses``), the logo to the site's own copy, and any other
off-machine asset is dropped, so no page requests anything from the network.

Dropped on purpose: Vega (GX uses it only for profiling charts, which the gates never
render) and the optional dark theme (``bootstrap-prefers-dark``, 150 kB of restyling).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

VENDOR = Path(__file__).resolve().parent / "data_docs_vendor"
SITE_VENDOR = Path("static") / "vendor"
# CDN address (prefix, as GX 1.24's templates write it) -> vendored file of the same version
VENDORED = {
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css": "css/bootstrap.min.css",  # noqa: E501
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js": "js/bootstrap.min.js",
    "https://code.jquery.com/jquery-3.7.1.min.js": "js/jquery.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js": "js/popper.min.js",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css": "css/bootstrap-table.min.css",  # noqa: E501
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js": "js/bootstrap-table.min.js",  # noqa: E501
    "https://unpkg.com/bootstrap-table@1.19.1/dist/extensions/filter-control/bootstrap-table-filter-control.min.js": "js/bootstrap-table-filter-control.min.js",  # noqa: E501
    # the templates name 1.19.0 for this stylesheet (and .css or .min.css): same file
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.min.css": "css/bootstrap-table-filter-control.min.css",  # noqa: E501
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.css": "css/bootstrap-table-filter-control.min.css",  # noqa: E501
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/bootstrap-datepicker.min.css": "css/bootstrap-datepicker.min.css",  # noqa: E501
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/bootstrap-datepicker.min.js": "js/bootstrap-datepicker.min.js",  # noqa: E501
    "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css": "css/fontawesome-all.min.css",  # noqa: E501
}  # fmt: skip
LOGO = re.compile(r'src="https://great-expectations-web-assets\.[^"]*"')
# GX writes the favicon one folder too high on validation pages (outside the site).
FAVICON = re.compile(r'(<link rel="shortcut icon" href=)"[^"]*"')
# A tag that would still fetch something off the machine: a stylesheet, script or image
# whose address is absolute (links a reader clicks, <a href>, are not fetched).
REMOTE_ASSET = re.compile(
    r'<script[^>]*\ssrc="(?:https?:)?//[^"]*"[^>]*>\s*</script>'
    r'|<link[^>]*\shref="(?:https?:)?//[^"]*"[^>]*>'
    r'|<img[^>]*\ssrc="(?:https?:)?//[^"]*"[^>]*>',
    re.IGNORECASE,
)
# Subresource integrity needs CORS, which file:// pages cannot do; the files are local.
INTEGRITY = re.compile(r'\s(?:integrity|crossorigin)="[^"]*"')


def copy_vendor(site: Path) -> Path:
    """The vendored assets in the site's ``static/vendor`` (copied when missing or older)."""
    target = site / SITE_VENDOR
    for source in VENDOR.rglob("*"):
        if source.is_dir() or "licenses" in source.relative_to(VENDOR).parts[:1]:
            continue
        copy = target / source.relative_to(VENDOR)
        if not copy.exists() or copy.stat().st_mtime < source.stat().st_mtime:
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy)
    return target


def offline_html(html: str, page_dir: Path, site: Path) -> str:
    """``html`` of a page in ``page_dir`` with every asset served from ``site``."""

    def local(path: Path) -> str:
        return Path(os.path.relpath(site / path, page_dir)).as_posix()

    for url, file in VENDORED.items():
        html = html.replace(f'"{url}"', f'"{local(SITE_VENDOR / file)}"')
    html = LOGO.sub(f'src="{local(Path("static/images/logo-long.png"))}"', html)
    html = FAVICON.sub(rf'\1"{local(Path("static/images/favicon.ico"))}"', html)
    html = INTEGRITY.sub("", html)
    return REMOTE_ASSET.sub("", html)


def make_offline(site: Path, pages: Iterable[Path] | None = None) -> list[Path]:
    """Rewrite ``pages`` of the site (every page when None) to load nothing from the
    network; the pages changed."""
    if not site.is_dir():
        return []
    copy_vendor(site)
    changed = []
    for page in site.rglob("*.html") if pages is None else pages:
        if not page.is_file():
            continue
        html = page.read_text(encoding="utf-8")
        fixed = offline_html(html, page.parent, site)
        if fixed != html:
            page.write_text(fixed, encoding="utf-8")
            changed.append(page)
    return changed
