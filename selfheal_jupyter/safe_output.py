"""What of a candidate's output may leave the sandbox, and in which form.

A candidate is untrusted code. Whatever it makes — text, HTML, figures — ends in the
user's browser (panel, static HTML, ``%agent_export`` notebooks that nbconvert turns
into pages), in ``agent_result`` and in JSON records. Three kinds of rich output are
kept, each in a form that cannot run or load anything:

- ``text/plain``: text, lone surrogates replaced (they make UTF-8 encoding raise);
- ``text/html``: table and text markup only, through nh3 (no scripts, styles, event
  handlers, URLs, images, links, nor ``class`` attributes that could borrow the page's
  own styles and pass for our interface);
- ``image/png``: strict base64 of bytes that start with the PNG signature.

Everything else (``application/javascript``, SVG, a forged MIME type) is dropped. The
rules are applied where a result is built from the sandbox's frame and again wherever
an output is shown or exported, so a record made any other way is held to them too.
"""

from __future__ import annotations

import base64
import binascii
import re

import nh3

TEXT = "text/plain"
HTML = "text/html"
PNG = "image/png"

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

_SURROGATE = re.compile("[\ud800-\udfff]")

_TAGS = {
    "table",
    "thead",
    "tbody",
    "tfoot",
    "tr",
    "th",
    "td",
    "caption",
    "colgroup",
    "col",
    "div",
    "span",
    "p",
    "br",
    "hr",
    "pre",
    "code",
    "b",
    "strong",
    "i",
    "em",
    "small",
    "sub",
    "sup",
    "ul",
    "ol",
    "li",
    "dl",
    "dt",
    "dd",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
}
_CELL_ATTRS = {"colspan", "rowspan", "align"}
_ATTRIBUTES = {
    "table": {"border"},
    "th": _CELL_ATTRS,
    "td": _CELL_ATTRS,
    "col": {"span"},
    "colgroup": {"span"},
}


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (so it always encodes as UTF-8).

    JSON can carry ``"\\ud800"``; Python decodes it into a string that
    ``str.encode("utf-8")`` refuses, which would break the display message, the
    notebook file or nh3 much later and far from the cause.
    """
    return _SURROGATE.sub("\ufffd", text)


def sanitize_html(html: str) -> str:
    """Keep table/text markup of untrusted HTML; drop everything that can run, load or pose."""
    return nh3.clean(
        clean_text(html),
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        clean_content_tags={"script", "style"},
        url_schemes=set(),
        link_rel=None,
    )


def is_png_base64(data: str) -> bool:
    """True if ``data`` is strict base64 (no whitespace, padded) of bytes of a PNG file."""
    if not data.isascii():
        return False
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return False
    return raw.startswith(PNG_SIGNATURE)


def clean_output(mime: object, data: object) -> str | None:
    """The data of one rich output as it may be shown, or None when it must be dropped."""
    if not isinstance(mime, str) or not isinstance(data, str):
        return None
    if mime == TEXT:
        return clean_text(data)
    if mime == HTML:
        return sanitize_html(data)
    if mime == PNG:
        return data if is_png_base64(data) else None
    return None
