#!/usr/bin/env python3
"""tests/e2e/check_report_page.py -- checks a `vramscope report` page as Chromium rendered it.

usage: check_report_page.py DOM.html SCREENSHOT.png SHOW.json [MIN_CHARTS]

DOM.html is Chromium's --dump-dom of the page (after its script ran), SCREENSHOT.png a
screenshot taken at the same window size, SHOW.json `vramscope show --json` of the recording.
Checks that the script ran without errors, that every number in the summary tables and the
embedded JSON equals show's, and that every chart's plot area on screen is not blank.
Standard library only (the PNG is decoded here), so it runs wherever python3 does.
"""
import html.parser
import json
import struct
import sys
import zlib


class Page(html.parser.HTMLParser):
    """Collects the attributes the checks need: the root, table cells, charts, categories."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = {}
        self.rows = []          # (row attrs, [cell attrs])
        self.charts = []        # attrs of svg.chart
        self.categories = {}    # (section data-proc, category) -> bytes
        self.section_proc = None
        self.in_json = False
        self.json_text = ""

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html":
            self.root = a
        elif tag == "tr":
            self.rows.append((a, []))
        elif tag == "td" and self.rows:
            self.rows[-1][1].append(a)
        elif tag == "svg" and "chart" in a.get("class", "").split():
            self.charts.append(a)
        elif tag == "section" and "proc" in a.get("class", "").split():
            self.section_proc = a.get("data-proc")
        elif tag == "span" and "data-category" in a:
            self.categories[(self.section_proc, a["data-category"])] = int(a["data-bytes"])
        elif tag == "script" and a.get("id") == "summary-json":
            self.in_json = True

    def handle_endtag(self, tag):
        if tag == "script":
            self.in_json = False

    def handle_data(self, data):
        if self.in_json:
            self.json_text += data


def read_png(path):
    """Returns (width, height, rows of RGB tuples) of an 8-bit RGB or RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color = header[0], header[1], header[2], header[3]
    assert depth == 8 and color in (2, 6), f"unsupported PNG (depth {depth}, colour type {color})"
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                predictor = left if pa <= pb and pa <= pc else (up if pb <= pc else corner)
                line[i] = (line[i] + predictor) & 0xFF
        rows.append(line)
        previous = line
    return width, height, rows, channels


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def main():
    dom_path, png_path, show_path = sys.argv[1:4]
    min_charts = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    page = Page()
    with open(dom_path, encoding="utf-8") as f:
        page.feed(f.read())
    with open(show_path, encoding="utf-8") as f:
        show = json.load(f)

    if page.root.get("data-ready") != "yes":
        fail("the page's script did not finish cleanly "
             f"(data-ready={page.root.get('data-ready')!r})")
    if json.loads(page.json_text) != show:
        fail("the embedded summary JSON differs from `vramscope show --json`")

    checked = 0
    for row, cells in page.rows:
        values = {c["data-field"]: c for c in cells if "data-field" in c}
        if "data-pid" in row:
            want = next((p for p in show["processes"] if str(p["pid"]) == row["data-pid"]
                         and p["device_uuid"] == row["data-device-uuid"]), None)
            fields = ["peak_used_bytes", "torch_peak_allocated_bytes", "torch_peak_reserved_bytes",
                      "max_step_peak_allocated_bytes"]
        elif "data-device-uuid" in row:
            want = next((d for d in show["devices"] if d["uuid"] == row["data-device-uuid"]), None)
            fields = ["total_bytes", "peak_used_bytes"]
        else:
            continue
        if want is None:
            fail(f"a table row {row} is not in show --json")
        for field in fields:
            shown = values[field].get("data-bytes", "")
            expected = "" if want[field] is None else str(want[field])
            if shown != expected:
                fail(f"{field} of {row}: page says {shown!r}, show --json {expected!r}")
            checked += 1
        if "data-pid" in row:
            count = values["step_count"].get("data-count", "")
            if count != ("" if want["step_count"] is None else str(want["step_count"])):
                fail(f"step_count of {row}: page {count!r}, show {want['step_count']!r}")
    rows_expected = len(show["devices"]) + len(show["processes"])
    if checked < rows_expected:
        fail(f"only {checked} values checked for {rows_expected} rows")

    for (proc, category), value in page.categories.items():
        sums = [p["category_step_bytes"][category] for p in show["processes"]
                if p["category_step_bytes"]]
        if value not in sums:
            fail(f"category {category} of process {proc}: {value} is not in show --json ({sums})")

    width, height, pixels, channels = read_png(png_path)
    blank = []
    drawn = 0
    for chart in page.charts:
        x, y, w, h = (int(v) for v in chart["data-box"].split(","))
        if w <= 0 or h <= 0 or x + w > width or y + h > height:
            continue  # below the screenshot's bottom edge
        colours, inked, total = set(), 0, 0
        for yy in range(y + 2, y + h - 2, 2):
            line = pixels[yy]
            for xx in range(x + 2, x + w - 2, 2):
                rgb = tuple(line[xx * channels:xx * channels + 3])
                total += 1
                if rgb != (255, 255, 255):
                    inked += 1
                    colours.add(rgb)
        drawn += 1
        if total == 0 or inked / total < 0.01 or len(colours) < 2:
            blank.append(f"{chart.get('data-chart')} "
                         f"({inked}/{total} inked, {len(colours)} colours)")
    if blank:
        fail("blank plot areas: " + ", ".join(blank))
    if drawn < min_charts:
        fail(f"only {drawn} charts were on the screenshot, expected at least {min_charts}")
    print(f"ok: {checked} values equal show --json, {len(page.categories)} categories, "
          f"{drawn} charts drawn")


if __name__ == "__main__":
    main()
