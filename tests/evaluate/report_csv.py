"""The CSV downloads of a report's tables, as the page script builds them (``tableCsv``
of :mod:`censusdp.evaluate._html`): a cell's ``data-csv`` values, else its ``data-v``,
else its text; and the check that they hold numbers, not the page's words."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser


class _Tables(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[tuple[str, list[list[str]]]] = []
        self._cell: list[str] | None = None
        self._text: list[str] = []
        self._row: list[str] | None = None
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "csv" in (a.get("class") or "").split():
            self.tables.append((a.get("data-name") or "table", []))
            self._depth = 1
        elif tag == "table" and self._depth:
            self._depth += 1
        elif tag == "tr" and self._depth:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            if "data-csv" in a:
                self._cell = ["" if v is None else str(v) for v in json.loads(a["data-csv"])]
            elif "data-v" in a:
                self._cell = [a["data-v"]]
            else:
                self._cell, self._text = None, []

    def handle_data(self, data):
        if self._row is not None and self._cell is None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._row is not None:
            self._row.extend(
                self._cell if self._cell is not None else ["".join(self._text).strip()]
            )
            self._cell, self._text = None, []
        elif tag == "tr" and self._row is not None:
            self.tables[-1][1].append(self._row)
            self._row = None
        elif tag == "table" and self._depth:
            self._depth -= 1


def table_csvs(page: str) -> dict[str, list[list[str]]]:
    """Every downloadable table's CSV cells (header row first), by its download name."""
    parser = _Tables()
    parser.feed(page)
    return {name: rows for name, rows in parser.tables}


_WORDS_AND_NUMBERS = re.compile(r"\d.*(within|n =|±|\(|%)|\d{1,3}(,\d{3})+")


def mixed_cells(page: str) -> list[tuple[str, str]]:
    """``(table, cell)`` of every downloaded cell that mixes numbers with words or
    separators (``1 (9 in 10 within 4; n = 2,123)``, ``2,123``, ``1.2 ± 0.3``), and of
    every row whose width is not its header's; the first column, the row's name, may
    hold words and numbers."""
    bad = []
    for name, rows in table_csvs(page).items():
        for row in rows[1:]:
            if len(row) != len(rows[0]):
                bad.append((name, f"{len(row)} cells under {len(rows[0])} columns"))
            # the first column names the row (a place, a level, "1,000-9,999 people")
            bad += [(name, c) for c in row[1:] if _WORDS_AND_NUMBERS.search(c)]
    return bad
