"""The SVG chart helper: well-formed, escaped, NaN/inf-safe, one link per x, a movable cursor."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

from hypothesis import given, settings
from hypothesis import strategies as st

from app.svg import fmt, line_chart, nice_ticks

NS = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def numeric_attributes(root: ET.Element) -> list[str]:
    names = ("x", "y", "x1", "x2", "y1", "y2", "cx", "cy", "width", "height", "r", "d")
    return [e.attrib[n] for e in root.iter() for n in names if n in e.attrib]


def test_labels_and_urls_are_escaped() -> None:
    evil = "<script>alert(\"x\")</script> & 'q'"
    svg = line_chart([(0, 1.0), (1, 2.0)], x_label=evil, y_label=evil, title=evil, point_url=lambda x: f'/p?a={x}&b="<{x}>"')
    assert "<script>" not in svg
    root = parse(svg)  # well-formed XML although every text held markup
    assert root.find(f"{NS}title").text == evil
    hrefs = [a.attrib["href"] for a in root.iter(f"{NS}a")]
    assert hrefs == ['/p?a=0&b="<0>"', '/p?a=1&b="<1>"']  # exact after XML unescaping
    assert [e.text for e in root.iter(f"{NS}text") if "chart-label" in e.attrib.get("class", "")] == [evil, evil]


def test_non_finite_values_break_the_line_and_are_marked() -> None:
    points = [(0, 1.0), (1, float("nan")), (2, 3.0), (3, 4.0), (4, float("inf")), (5, None), (6, 2.0)]
    svg = line_chart(points, x_label="step", y_label="reward", point_url=lambda x: f"/t/{x}")
    root = parse(svg)
    for value in numeric_attributes(root):
        assert not re.search(r"nan|inf", value, re.I), value
    path = next(e for e in root.iter(f"{NS}path") if e.attrib.get("class") == "chart-series").attrib["d"]
    assert path.count("M") == 3  # runs: [0], [2, 3], [6]
    missing = [e for e in root.iter(f"{NS}g") if e.attrib.get("class") == "chart-missing"][0]
    titles = [line.find(f"{NS}title").text for line in missing]
    assert titles == ["step 1: reward NaN", "step 4: reward inf", "step 5: reward missing"]
    assert len(list(root.iter(f"{NS}a"))) == 7  # every x is a link, its value notwithstanding


def test_non_finite_x_is_dropped_and_points_are_sorted() -> None:
    root = parse(line_chart([(2, 1.0), (float("nan"), 2.0), (0, 0.5), ("x", 1.0)], point_url=lambda x: f"/s/{x}"))
    assert [a.attrib["href"] for a in root.iter(f"{NS}a")] == ["/s/0", "/s/2"]


def test_cursor_and_data_attributes_place_a_step() -> None:
    root = parse(line_chart([(0, 0.0), (10, 1.0)], width=300, cursor=5, step=True))
    x0, x1 = float(root.attrib["data-x0"]), float(root.attrib["data-x1"])
    p0, p1 = float(root.attrib["data-px0"]), float(root.attrib["data-px1"])
    cursor = next(e for e in root.iter(f"{NS}line") if e.attrib.get("class") == "chart-cursor")
    assert float(cursor.attrib["x1"]) == p0 + (5 - x0) * (p1 - p0) / (x1 - x0)
    assert "chart-step" in root.attrib["class"]
    path = next(e for e in root.iter(f"{NS}path")).attrib["d"]
    assert "H" in path and "V" in path  # a step chart holds each value until the next x


def test_many_points_bin_their_links() -> None:
    root = parse(line_chart([(i, math.sin(i)) for i in range(5000)], point_url=lambda x: f"/x/{x}", max_links=100))
    links = list(root.iter(f"{NS}a"))
    assert len(links) == 100
    assert links[1].attrib["href"] == "/x/50"
    assert not list(root.iter(f"{NS}circle"))  # no dot per point at this density


def test_empty_and_constant_series() -> None:
    assert "no data" in line_chart([])
    assert "no data" in line_chart([(float("nan"), 1.0)])
    root = parse(line_chart([(3, 2.0)]))
    assert root.attrib["data-x0"] != root.attrib["data-x1"]  # a single point still gets a domain


def test_category_ticks() -> None:
    root = parse(line_chart([(0, 0), (1, 3)], y_ticks=[(0, "0 up"), (3, "3 left")], step=True))
    texts = [e.text for e in root.iter(f"{NS}text")]
    assert "0 up" in texts and "3 left" in texts


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(allow_nan=True, allow_infinity=True), st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))),
        max_size=40,
    )
)
def test_any_series_gives_well_formed_finite_svg(points: list[tuple[float, float | None]]) -> None:
    root = parse(line_chart(points, point_url=lambda x: f"/s?x={x}", cursor=points[0][0] if points else None))
    for value in numeric_attributes(root):
        assert not re.search(r"nan|inf", value, re.I), value


def test_ticks_and_format() -> None:
    assert nice_ticks(0, 10, 5) == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert nice_ticks(-0.013, -0.007, 3)[0] >= -0.013
    assert nice_ticks(float("nan"), 1) == []
    assert (fmt(0.5), fmt(-1234.0), fmt(1e-7)) == ("0.5", "-1234", "1e-07")
