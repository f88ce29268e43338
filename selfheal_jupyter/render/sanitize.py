"""Make HTML that came out of the sandbox safe to show in the user's browser.

A candidate is untrusted code: the HTML it returns (e.g. a DataFrame's
``_repr_html_``) is rendered in the user's JupyterLab, where a ``<script>``, an event
handler or a remote URL would run or load with the user's session — a way out of the
sandbox. Only table and text markup survives; scripts, styles, handlers, images and
links are dropped. Figures come back separately as PNG bytes.
"""

from __future__ import annotations

import nh3

_TAGS = {
    "table", "thead", "tbody", "tfoot", "tr", "th", "td", "caption", "colgroup", "col",
    "div", "span", "p", "br", "hr", "pre", "code", "b", "strong", "i", "em", "small",
    "sub", "sup", "ul", "ol", "li", "dl", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6",
}
_CELL_ATTRS = {"colspan", "rowspan", "align", "class"}
_ATTRIBUTES = {
    "*": {"class"},
    "table": {"class", "border"},
    "th": _CELL_ATTRS,
    "td": _CELL_ATTRS,
    "col": {"span"},
    "colgroup": {"span"},
}


def sanitize_html(html: str) -> str:
    """Keep table/text markup of untrusted HTML; drop everything that can run or load."""
    return nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        clean_content_tags={"script", "style"},
        url_schemes=set(),
        link_rel=None,
    )
