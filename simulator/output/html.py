"""The pieces of a self-contained HTML page (``--format html``, :mod:`.report`): a table of
escaped cells, a matplotlib figure as a PNG inside the page (a ``data:`` URI), and the page
itself with its CSS inline.

Every string that goes in is escaped here (:func:`html.escape`): a scenario's name, an
algorithm's, a fault's come from users. The page loads nothing: no script, no font, no style
sheet, no image from anywhere else, so it opens the same offline, from a mail or an archive.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape

from matplotlib.figure import Figure

from simulator.output.plots import DPI

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 78em; padding: 0 1em;
       color: #1a1a1a; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; margin-top: 1.8em; }
.meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: 0.6em 0; }
th, td { padding: 0.2em 0.6em; border-bottom: 1px solid #ddd; text-align: left; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.mark td { background: #fff4d6; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption, .note { color: #555; font-size: 0.92em; }
.caveat { background: #fff0f0; border-left: 4px solid #c33; padding: 0.4em 0.8em; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 12px; }
"""
"""The page's whole style, inline: no style sheet is fetched."""


@dataclass(frozen=True)
class Cell:
    """A table cell: the text shown, a tooltip (``title``: the exact value behind a rounded
    one), and whether it is a number (right-aligned)."""

    text: str
    title: str = ""
    number: bool = False

    def html(self) -> str:
        """The ``<td>``, its text and tooltip escaped."""
        title = f' title="{escape(self.title)}"' if self.title else ""
        kind = ' class="num"' if self.number else ""
        return f"<td{kind}{title}>{escape(self.text)}</td>"


def table(ident: str, headers: Sequence[str], rows: Iterable[Sequence[Cell]],
          marked: Iterable[bool] = ()) -> str:
    """A ``<table id=ident>``: a header row, then a ``<tr>`` per row (``class="mark"`` on those
    ``marked`` true, in order; the rest unmarked)."""
    marks = iter(marked)
    head = "".join(f"<th>{escape(header)}</th>" for header in headers)
    body = "".join(("<tr class=\"mark\">" if next(marks, False) else "<tr>")
                   + "".join(cell.html() for cell in row) + "</tr>\n" for row in rows)
    return (f'<table id="{escape(ident)}">\n<thead><tr>{head}</tr></thead>\n'
            f"<tbody>\n{body}</tbody>\n</table>")


def png_uri(figure: Figure) -> str:
    """A figure as a PNG ``data:`` URI, at the resolution of the PNG files (:data:`DPI`)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def figure(ident: str, drawn: Figure, caption: str) -> str:
    """A ``<figure>`` holding ``drawn`` as an image inside the page, with its caption (also the
    image's alternative text)."""
    return (f'<figure id="{escape(ident)}"><img src="{png_uri(drawn)}" alt="{escape(caption)}">'
            f"<figcaption>{escape(caption)}</figcaption></figure>")


def paragraph(text: str, kind: str = "note") -> str:
    """A ``<p class=kind>`` of escaped text."""
    return f'<p class="{escape(kind)}">{escape(text)}</p>'


def page(title: str, body: Sequence[str]) -> str:
    """The whole document: ``title`` (escaped), the style inline, the ``body`` fragments (each
    already HTML) in order."""
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")
