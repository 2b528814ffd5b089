"""The request URLs of arXiv's OAI-PMH endpoint: ``ListRecords`` (a first request or a resumption) and
``GetRecord`` (one paper), checked against the OAI-PMH 2.0 argument rules before any request is made."""

from __future__ import annotations

import re
from datetime import date, datetime
from urllib.parse import quote, urlencode

from core.values import ARXIV_ID_PATTERN
from ingest.arxiv_oai_parse_values import METADATA_PREFIXES

__all__ = ["URL_HINT", "build_get_record_url", "build_list_records_url"]

# What to check when the endpoint answers something unusable.
URL_HINT = "check the OAI-PMH base URL (https://oaipmh.arxiv.org/oai or http://export.arxiv.org/oai2)"

_ID_RE = re.compile(rf"\A{ARXIV_ID_PATTERN}\Z")
_VERSIONED_RE = re.compile(rf"\A(?P<id>{ARXIV_ID_PATTERN})v(?P<version>\d+)\Z")


def build_list_records_url(
    base: str,
    *,
    metadata_prefix: str | None = None,
    set_spec: str | None = None,
    from_date: date | None = None,
    until: date | None = None,
    resumption_token: str | None = None,
) -> str:
    """The URL of a ``ListRecords`` request, following the OAI-PMH 2.0 argument rules.

    A first request needs ``metadata_prefix`` and may add ``set_spec`` and a ``from_date``/``until`` window
    (days, inclusive; arXiv's granularity is ``YYYY-MM-DD``). A follow-up request carries only the verb and
    the ``resumption_token`` (OAI-PMH makes it an exclusive argument), so passing anything else with a token
    is a ``ValueError``, as is a ``datetime`` (it would draw ``badArgument``) or a window that ends before it
    starts.
    """
    _check_base(base)
    if resumption_token is not None:
        others = {
            "metadata_prefix": metadata_prefix,
            "set_spec": set_spec,
            "from_date": from_date,
            "until": until,
        }
        extra = [name for name, value in others.items() if value is not None]
        if extra:
            raise ValueError(
                f"a resumptionToken request carries only verb and token, but {', '.join(extra)} "
                "was also given; the token already encodes the original request's arguments"
            )
        if not resumption_token.strip():
            raise ValueError("the resumptionToken is empty: an empty token means the list is complete")
        return _url(base, {"verb": "ListRecords", "resumptionToken": resumption_token})
    if metadata_prefix is None:
        raise ValueError(
            f"a first ListRecords request needs metadata_prefix ({', '.join(METADATA_PREFIXES)})"
        )
    _check_prefix(metadata_prefix)
    params = {"verb": "ListRecords", "metadataPrefix": metadata_prefix}
    if from_date is not None:
        params["from"] = _day(from_date, "from_date")
    if until is not None:
        params["until"] = _day(until, "until")
    if from_date is not None and until is not None and until < from_date:
        raise ValueError(f"until ({until}) is before from_date ({from_date}); OAI-PMH answers badArgument")
    if set_spec is not None:
        if not set_spec.strip() or any(ch.isspace() for ch in set_spec):
            raise ValueError(f"set_spec {set_spec!r} is not a setSpec (e.g. cs, math, physics:hep-th)")
        params["set"] = set_spec
    return _url(base, params)


def build_get_record_url(base: str, *, arxiv_id: str, metadata_prefix: str = "arXivRaw") -> str:
    """The URL of a ``GetRecord`` request for one paper, ``arxiv_id`` without version suffix.

    arXiv answers ``idDoesNotExist`` to a versioned identifier (``oai:arXiv.org:1305.0014v1``), so a
    versioned id is refused here with a ``ValueError`` instead of costing a request.
    """
    _check_base(base)
    _check_prefix(metadata_prefix)
    bare = arxiv_id.strip()
    versioned = _VERSIONED_RE.match(bare)
    if versioned:
        raise ValueError(
            f"{arxiv_id!r} has a version suffix; OAI-PMH only knows whole papers: "
            f"use {versioned.group('id')!r}"
        )
    if not _ID_RE.match(bare):
        raise ValueError(f"{arxiv_id!r} is not an arXiv id (2411.17700 or hep-th/9901001)")
    return _url(
        base, {"verb": "GetRecord", "identifier": f"oai:arXiv.org:{bare}", "metadataPrefix": metadata_prefix}
    )


def _check_base(base: str) -> None:
    if "?" in base or not base.startswith(("http://", "https://")):
        raise ValueError(f"base {base!r} must be an http(s) URL without a query; {URL_HINT}")


def _check_prefix(prefix: str) -> None:
    if prefix not in METADATA_PREFIXES:
        raise ValueError(
            f"metadata_prefix {prefix!r} is not one parse_oai reads; "
            f"use one of {', '.join(METADATA_PREFIXES)}"
        )


def _day(value: date, name: str) -> str:
    if isinstance(value, datetime):
        raise ValueError(f"{name} must be a date: arXiv's OAI-PMH granularity is days (YYYY-MM-DD)")
    return value.isoformat()


def _url(base: str, params: dict[str, str]) -> str:
    # ':' stays readable in set specs and identifiers; everything else reserved is percent-encoded,
    # including the '|' of arXiv's tokens.
    return f"{base}?{urlencode(params, quote_via=quote, safe=':')}"
