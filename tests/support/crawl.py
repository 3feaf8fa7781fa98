"""Crawl an inspector in-process: follow every link of every page (and its JSON twin), one URL per shape.

A link is anything a page makes the browser load or lets the user open:
``a[href]``, ``img``/``source``/``video``/``audio``/``script`` sources,
``link[href]``, htmx ``hx-get`` URLs, the ``data-fragment`` and ``data-live`` URLs scripts load,
redirect targets, and the ``action`` of GET forms with the values of
their pre-filled inputs and selected options (a form that needs typing is
left with those it has). Only same-origin URLs are followed.

URLs that differ only by numbers — a step, sample position, flag id, frame,
or a numeric query value such as a page cursor — have the same *shape* and
only the first one found is fetched; everything else (run and dataset names,
ranks, since each rank of a step holds other samples, version ids, sample
keys, non-numeric query values such as ``sort=`` or ``view=``) makes a new
shape. Sample keys are capped at ``keys_per_shape``
per route and version, so every version shows a few of its samples.
"""

from __future__ import annotations

import re
import time
from collections import deque
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any, Callable
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit

#: Attributes that hold a URL, per tag (``*``: any tag).
URL_ATTRIBUTES = {
    "a": ("href",),
    "link": ("href",),
    "img": ("src",),
    "source": ("src",),
    "video": ("src", "poster"),
    "audio": ("src",),
    "script": ("src",),
    "*": ("hx-get", "data-fragment", "data-live"),
}
#: Path segments that are followed by a sample key (``…/versions/{version}/samples/{key}``).
KEYED = ("samples", "rollouts", "episodes")
#: Query parameters whose values name a record (a key, a key cursor, a rollout group): capped like sample keys.
KEY_PARAMETERS = ("key", "after", "group")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


class _Links(HTMLParser):
    """Collects every URL a page links to (see the module docstring), with GET forms made into URLs."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self._form: tuple[str, list[tuple[str, str]]] | None = None
        self._select: tuple[str, list[str]] | None = None  # its name and option values, the selected one first

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        for name in (*URL_ATTRIBUTES.get(tag, ()), *URL_ATTRIBUTES["*"]):
            if values.get(name):
                self.links.append(values[name])
        if tag == "form" and values.get("method", "get").lower() == "get" and values.get("action"):
            self._form = (values["action"], [])
        elif tag == "input" and self._form is not None and values.get("name") and values.get("value"):
            self._form[1].append((values["name"], values["value"]))
        elif tag == "select" and self._form is not None and values.get("name"):
            self._select = (values["name"], [])
        elif tag == "option" and self._select is not None and "value" in values:
            options = self._select[1]
            options.insert(0, values["value"]) if "selected" in values else options.append(values["value"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "select" and self._select is not None and self._form is not None:
            name, options = self._select
            if options:
                self._form[1].append((name, options[0]))
            self._select = None
        if tag == "form" and self._form is not None:
            action, fields = self._form
            if fields:
                self.links.append(action + ("&" if "?" in action else "?") + urlencode(fields))
            self._form = None


def links_of(html: str) -> list[str]:
    """Every URL ``html`` links to, as written.

    >>> links_of('<a href="/a">a</a><div hx-get="/b"></div><form action="/c"><input name="x" value="1"></form>')
    ['/a', '/b', '/c?x=1']
    """
    parser = _Links()
    parser.feed(html)
    return parser.links


def shape(url: str) -> tuple[str, str]:
    """``(shape, key group)`` of a URL: numbers made ``N``; a sample key made ``K`` (its group is the URL up to it).

    >>> shape("/runs/r/steps/12/ranks/1?sort=loss&from=3")
    ('/runs/r/steps/N/ranks/1?from=N&sort=loss', '')
    >>> shape("/datasets/d/versions/abc/samples/k%2F1?field=image")
    ('/datasets/d/versions/abc/samples/K?field=image', '/datasets/d/versions/abc/samples/?field=image')
    >>> shape("/datasets/d/versions/abc/groups?group=g7&sort=reward")
    ('/datasets/d/versions/abc/groups?group=K&sort=reward', '/datasets/d/versions/abc/groups?group=K&sort=reward')
    """
    parts = urlsplit(url)
    segments = parts.path.split("/")
    out, group = [], ""
    for i, segment in enumerate(segments):
        if i >= 3 and segments[i - 1] in KEYED and segments[i - 3] == "versions" and segment:
            out.append("K")
            group = "/".join(segments[:i]) + "/"
        elif _NUMBER.match(segment) and segments[i - 1] != "ranks":
            out.append("N")
        else:
            out.append(segment)
    query = sorted(parse_qsl(parts.query, keep_blank_values=True))
    keyed = [(n, "K" if n in KEY_PARAMETERS else "N" if _NUMBER.match(v) else v) for n, v in query]
    text = "/".join(out) + ("?" + "&".join(f"{n}={v}" for n, v in keyed) if keyed else "")
    if group or any(n in KEY_PARAMETERS for n, _ in query):
        group = (group or "/".join(out)) + "?" + "&".join(f"{n}={v}" for n, v in keyed)
    return text, group


@dataclass
class Visit:
    url: str
    status: int
    seconds: float
    referrer: str
    #: What ``check`` found wrong with the answer (``None``: nothing).
    problem: str | None = None


@dataclass
class Crawl:
    """What a crawl fetched: every visit, the shapes it found and the time it took."""

    visits: list[Visit] = field(default_factory=list)
    shapes: set[str] = field(default_factory=set)
    seconds: float = 0.0

    def failures(self, *, at_least: int = 500) -> list[Visit]:
        return [v for v in self.visits if v.status >= at_least]


def crawl(
    get: Callable[[str], Any],
    start: str = "/",
    *,
    keys_per_shape: int = 3,
    limit: int = 5000,
    twin: Callable[[str], str | None] = lambda url: None,
    check: Callable[[str, Any], str | None] = lambda url, response: None,
) -> Crawl:
    """Breadth-first from ``start`` with ``get(url) -> response`` (a TestClient's, not following redirects).

    ``twin(url)`` names another URL to fetch for each page fetched (its JSON twin), or ``None``; ``check(url,
    response)`` says what is wrong with an answer (kept as the visit's ``problem``), or ``None``. Stops after
    ``limit`` URLs (a crawl that reaches it is not complete: the test checks it did not).
    """
    result = Crawl()
    queue: deque[tuple[str, str]] = deque([(start, "")])
    seen_urls: set[str] = {start}
    keys: dict[str, int] = {}
    result.shapes.add(shape(start)[0])
    started = time.monotonic()
    while queue and len(result.visits) < limit:
        url, referrer = queue.popleft()
        began = time.monotonic()
        response = get(url)
        result.visits.append(Visit(url, response.status_code, time.monotonic() - began, referrer, check(url, response)))
        found: list[str] = []
        if 300 <= response.status_code < 400 and "location" in response.headers:
            found.append(response.headers["location"])
        elif response.headers.get("content-type", "").startswith("text/html"):
            found = links_of(response.text)
        json_twin = twin(url)
        if json_twin is not None:
            found.append(json_twin)
        for link in found:
            absolute = urlsplit(urljoin("http://localhost" + url, link))
            if absolute.netloc != "localhost" or absolute.scheme not in ("http", ""):
                continue
            target = absolute.path + (f"?{absolute.query}" if absolute.query else "")
            if target in seen_urls:
                continue
            seen_urls.add(target)
            text, group = shape(target)
            if text in result.shapes:
                continue
            if group:
                if keys.get(group, 0) >= keys_per_shape:
                    continue
                keys[group] = keys.get(group, 0) + 1
            result.shapes.add(text)
            queue.append((target, url))
    result.seconds = time.monotonic() - started
    return result


def get_routes(app: Any) -> list[Any]:
    """Every route of ``app`` that answers GET (walking included routers), static files left out."""
    found, pending = [], list(app.routes)
    while pending:
        route = pending.pop(0)
        original = getattr(route, "original_router", None)
        if original is not None:
            pending.extend(original.routes)
        elif "GET" in (getattr(route, "methods", None) or ()):
            found.append(route)
    return found


def route_of(routes: list[Any], url: str) -> str | None:
    """The path template of the first of ``routes`` that matches ``url``'s path (what the app would run)."""
    from starlette.routing import Match

    scope = {"type": "http", "method": "GET", "path": urlsplit(url).path, "root_path": "", "query_string": b"", "headers": []}
    for route in routes:
        if route.matches(scope)[0] == Match.FULL:
            return str(route.path)
    return None
