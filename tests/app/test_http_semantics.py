"""HTTP semantics (RFC 9110) of the inspector: If-None-Match lists and weak tags, byte ranges, version refs that redirect to the id."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app import urls
from app.http_semantics import IMMUTABLE, byte_range, content_tag, entity_tags, if_none_match
from loaders import Catalog
from tests.app.dom import soup


# -- If-None-Match (RFC 9110 §13.1.2) ---------------------------------------------------
@pytest.mark.parametrize(
    "header, tags",
    [
        ('"a"', ['"a"']),
        ('"a", "b"', ['"a"', '"b"']),
        ('W/"a",W/"b"', ['"a"', '"b"']),
        ('  "a" ,, , W/"b"  ', ['"a"', '"b"']),  # empty list elements and whitespace are allowed
        ('"a,b", "c"', ['"a,b"', '"c"']),  # a comma inside the quotes belongs to the tag
        ('""', ['""']),
        ("*", "*"),
        (" * ", "*"),
        ('"a", garbage, "b"', ['"a"']),  # the malformed rest is ignored
        ("a", []),  # unquoted: not an entity tag
        ('w/"a"', []),  # the weak prefix is case-sensitive
        ("", []),
    ],
)
def test_entity_tags(header: str, tags: list[str] | str) -> None:
    assert entity_tags(header) == tags


@pytest.mark.parametrize(
    "header, tag, matches",
    [
        ('"x"', '"x"', True),
        ('"y", "x"', '"x"', True),
        ('W/"x"', '"x"', True),  # weak comparison: the weak flag is ignored on either side
        ('"x"', 'W/"x"', True),
        ('W/"x"', 'W/"x"', True),
        ('"x"', '"y"', False),
        ('"xy"', '"x"', False),
        ('"x,y"', '"x"', False),
        ("*", '"anything"', True),
        ('"*"', '"x"', False),
        (None, '"x"', False),
        ("", '"x"', False),
        ("x", '"x"', False),
    ],
)
def test_if_none_match(header: str | None, tag: str, matches: bool) -> None:
    assert if_none_match(header, tag) is matches


# -- Range (RFC 9110 §14) ----------------------------------------------------------------
@pytest.mark.parametrize(
    "header, size, wanted",
    [
        (None, 10, None),
        ("", 10, None),
        ("bytes=0-0", 10, (0, 0)),
        ("bytes=2-5", 10, (2, 5)),
        ("bytes=2-", 10, (2, 9)),
        ("bytes=5-100", 10, (5, 9)),  # a last byte past the end is clipped
        ("bytes=9-9", 10, (9, 9)),
        ("bytes=-3", 10, (7, 9)),  # suffix: the last 3 bytes
        ("bytes=-10", 10, (0, 9)),
        ("bytes=-100", 10, (0, 9)),  # a suffix longer than the whole is the whole
        ("Bytes=2-5", 10, (2, 5)),  # the unit is case-insensitive
        ("bytes= 2-5 ", 10, (2, 5)),
        ("bytes=2-5,", 10, (2, 5)),  # an empty list element
        ("bytes=10-", 10, "unsatisfiable"),
        ("bytes=10-20", 10, "unsatisfiable"),
        ("bytes=-0", 10, "unsatisfiable"),  # an empty suffix
        ("bytes=0-", 0, "unsatisfiable"),
        ("bytes=-5", 0, "unsatisfiable"),
        ("bytes=0-1,4-5", 10, None),  # several ranges: the whole is sent
        ("bytes=0-1, 20-30", 10, None),
        ("bytes=5-2", 10, None),  # last before first: the header is invalid and ignored
        ("bytes=-", 10, None),
        ("bytes=a-b", 10, None),
        ("bytes=+1-2", 10, None),
        ("bytes=1_0-20", 10, None),
        ("bytes=١-٢", 10, None),  # digits are ASCII digits
        ("bytes 0-5", 10, None),
        ("items=0-5", 10, None),
    ],
)
def test_byte_range(header: str | None, size: int, wanted: object) -> None:
    assert byte_range(header, size) == wanted


@pytest.fixture
def blob(client: TestClient, inspector_catalog: Catalog) -> tuple[str, bytes]:
    """A media URL of 12 stored bytes (``doc-11``'s ``blob``) and the bytes."""
    return urls.media("docs", inspector_catalog.resolve("docs@v1").id, "doc-11", "blob"), bytes([11]) * 12


@pytest.mark.parametrize(
    "range_, status, body, content_range",
    [
        ("bytes=2-5", 206, slice(2, 6), "bytes 2-5/12"),
        ("bytes=-5", 206, slice(7, 12), "bytes 7-11/12"),
        ("bytes=-50", 206, slice(0, 12), "bytes 0-11/12"),
        ("bytes=8-", 206, slice(8, 12), "bytes 8-11/12"),
        ("bytes=0-1,4-5", 200, slice(0, 12), None),
        ("bytes=5-2", 200, slice(0, 12), None),
    ],
)
def test_ranges_of_stored_bytes(
    client: TestClient, blob: tuple[str, bytes], range_: str, status: int, body: slice, content_range: str | None
) -> None:
    url, data = blob
    response = client.get(url, headers={"Range": range_})
    assert response.status_code == status and response.content == data[body]
    assert response.headers.get("content-range") == content_range
    assert response.headers["content-length"] == str(len(data[body]))
    assert response.headers["accept-ranges"] == "bytes" and response.headers["cache-control"] == IMMUTABLE


@pytest.mark.parametrize("range_", ["bytes=12-", "bytes=40-50", "bytes=-0"])
def test_unsatisfiable_ranges_answer_416_with_the_error_page(client: TestClient, blob: tuple[str, bytes], range_: str) -> None:
    url, _ = blob
    response = client.get(url, headers={"Range": range_})
    assert response.status_code == 416 and response.headers["content-range"] == "bytes */12"
    assert soup(response).select_one(".error-inline .message").get_text() == f"range {range_} is outside the 12 bytes stored"


def test_if_range_applies_the_range_only_for_the_same_tag(client: TestClient, blob: tuple[str, bytes]) -> None:
    url, data = blob
    tag = client.get(url).headers["etag"]
    assert tag == content_tag(data)
    same = client.get(url, headers={"Range": "bytes=0-1", "If-Range": tag})
    assert same.status_code == 206 and same.content == data[:2]
    for other in ('"something-else"', f"W/{tag}", "Tue, 01 Jan 2030 00:00:00 GMT"):
        whole = client.get(url, headers={"Range": "bytes=0-1", "If-Range": other})
        assert whole.status_code == 200 and whole.content == data, other


def test_if_none_match_lists_and_weak_tags_revalidate(client: TestClient, blob: tuple[str, bytes]) -> None:
    url, _ = blob
    tag = client.get(url).headers["etag"]
    for header in (tag, f'"old", {tag}', f"W/{tag}", "*"):
        response = client.get(url, headers={"If-None-Match": header, "Range": "bytes=0-1"})
        assert response.status_code == 304 and response.content == b"", header
        assert response.headers["etag"] == tag and response.headers["cache-control"] == IMMUTABLE
    assert client.get(url, headers={"If-None-Match": '"old"'}).status_code == 200


# -- a version ref in the URL ------------------------------------------------------------
PAGE, MEDIA = [lambda u: u, urls.api], [lambda u: u]  # a page also answers under /api; media do not


@pytest.mark.parametrize(
    "builder, twins",
    [
        (lambda v: urls.sample("docs", v, ".."), PAGE),  # a key that travels as ?key=
        (lambda v: urls.sample("docs", v, "a/b c?#%"), PAGE),
        (lambda v: urls.media_view("docs", v, "doc-1", "blob"), PAGE),
        (lambda v: urls.rollout_groups("docs", v, sort="-reward"), PAGE),
        (lambda v: urls.media("docs", v, "doc-1", "blob"), MEDIA),
        (lambda v: urls.episode_frame("docs", v, "a/b", t=3), MEDIA),
    ],
)
def test_a_ref_redirects_to_the_same_url_with_the_id(client: TestClient, inspector_catalog: Catalog, builder, twins) -> None:
    full = inspector_catalog.resolve("docs@v1").id
    for ref in ("v1", full[:8]):
        for wrap in twins:
            response = client.get(wrap(builder(ref)))
            assert response.status_code == 307 and response.content == b""
            assert response.headers["location"] == wrap(builder(full)) and response.headers["vary"] == "HX-Request"


def test_a_bad_ref_answers_before_the_page(client: TestClient) -> None:
    missing = client.get(urls.api(urls.sample("docs", "v9", "doc-1")))
    assert missing.status_code == 404 and "v9" in missing.json()["error"]
    bad = client.get(urls.api(urls.sample("bad name!", "v1", "doc-1")))
    assert bad.status_code == 422 and bad.json()["error"].startswith("invalid dataset name")
