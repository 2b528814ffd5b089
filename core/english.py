"""English wording of counts for the text PaperTrail writes in English only.

The operator's command line, the run notes stored with each source run, and the chart's description are
English by design (readers' text goes through the catalogs' ``ngettext`` instead, core.languages). They
say
"1 version" and "3 versions", never "version(s)".
"""

from __future__ import annotations


def counted(count: int, singular: str, plural: str | None = None, *, grouped: bool = False) -> str:
    """``count`` and the noun in the form it takes: "1 item", "19 items", "2 matches" with ``plural``.

    ``grouped`` writes thousands with commas ("12,345 papers").
    """
    number = f"{count:,}" if grouped else str(count)
    return f"{number} {singular if count == 1 else plural or singular + 's'}"
