"""HTML → PDF with WeasyPrint, through a URL fetcher that serves only files inside the report folder."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from weasyprint import HTML
from weasyprint.urls import URLFetcher, URLFetcherResponse


class FolderFetcher(URLFetcher):
    """Serves ``file:`` URLs inside `root` (and inline ``data:`` URLs); refuses everything else.

    Refused URLs are kept in ``refused``, so callers and tests can see what a document tried to load.
    """

    def __init__(self, root: Path):
        super().__init__(allowed_protocols=("file", "data"))
        self.root = Path(root).resolve()
        self.refused: list[str] = []

    def fetch(self, url: str, headers=None):
        parsed = urlparse(url)
        if parsed.scheme == "data":
            return super().fetch(url, headers)
        if parsed.scheme == "file":
            path = Path(unquote(parsed.path)).resolve()
            if path.is_relative_to(self.root) and path.is_file():
                return URLFetcherResponse(url, path.read_bytes(), {"Content-Type": _mime(path)})
        self.refused.append(url)
        raise ValueError(f"refused to fetch {url!r}: only files inside the report folder are served")


def _mime(path: Path) -> str:
    return {".css": "text/css", ".svg": "image/svg+xml", ".png": "image/png", ".jpg": "image/jpeg",
            ".woff2": "font/woff2", ".ttf": "font/ttf", ".otf": "font/otf"}.get(path.suffix.lower(),
                                                                                 "application/octet-stream")


def write_pdf(html: str, folder: Path) -> tuple[bytes, list[str]]:
    """The PDF bytes of `html` (resources resolved against `folder`) and the URLs that were refused."""
    fetcher = FolderFetcher(folder)
    data = HTML(string=html, base_url=str(Path(folder).resolve()) + "/", url_fetcher=fetcher).write_pdf()
    return data, fetcher.refused
