"""The manage page's library upload: ``POST /manage/{token}/library``.

A reader seeds their recommendations with the papers they keep: the manage page's form sends their
reference library (a BibTeX, RIS or CSL-JSON export of Zotero, Mendeley or JabRef) as
``multipart/form-data``, in the field ``library``. The file is read by
:func:`core.taste.library_file.read_library` (in a worker thread, in time linear in the file's size: a 5 MB
file built to be slow takes some 6 s of CPU) and imported by
:func:`core.taste.library_import.import_library` (its SQL in worker threads), the step ``papertrail import
library`` runs too. The answer is a page in the reader's language: how many entries were used and how, how
many papers are new, and each entry not used with its line and reason, with a link back to the manage page.

Bounds, in the order they apply (docs/recommendations.md, "Importing a library"):

* the manage token is checked first; a forged or altered one is refused before a byte of the body is read;
* a body that does not declare its length, or declares more than :data:`MAX_UPLOAD_BYTES` (the file's
  :data:`core.taste.library_file.MAX_FILE_BYTES` and :data:`MULTIPART_OVERHEAD` for the form's boundaries and
  headers), is refused with a page before it is read;
* the form may hold one file and :data:`MAX_FIELDS` fields; of the file at most ``MAX_FILE_BYTES + 1``
  bytes are read, and a larger one is refused with the same page;
* one import per subscriber at a time: a second upload while the first runs is refused (409). The lock
  lives in the process (a set of subscriber ids): two web processes could each run one, which costs only
  time, since importing a file twice adds nothing.

As on the other manage routes, the signed token in the URL is the authority: no cookie, no CSRF token (a
cross-site form would have to know the token), pages never cached nor sent on as a Referer, and the CSP
lets forms post only to this site. Everything the page prints from the file (its name, citation keys,
titles, DOIs) is escaped by the templates; keys are cut to :data:`KEY_LIMIT` characters.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial
from pathlib import PurePosixPath

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from core.models import Subscriber
from core.taste.library_file import MAX_FILE_BYTES, LibraryFileError, LibraryRead, read_library
from core.taste.library_import import LibraryReport, import_library
from papertrail.service.context import AppContext
from papertrail.web.pages import Pages, Reader
from papertrail.web.subscribers import MAX_FIELD, SubscriberPages

log = logging.getLogger(__name__)

# What a multipart body adds to the file: the boundary lines and each part's headers (the file name among
# them). 64 KiB is far more than a browser sends; a body declaring more than the two is refused unread.
MULTIPART_OVERHEAD = 64 * 1024
MAX_UPLOAD_BYTES = MAX_FILE_BYTES + MULTIPART_OVERHEAD
# Starlette's own limit for this route, set far above MAX_UPLOAD_BYTES on purpose: a declared length over
# it turns any answer into a bare "Content Too Large", so the handler, which refuses every declared length
# over MAX_UPLOAD_BYTES (and every undeclared one) before reading, must be the one that answers. It only
# replaces the app's 512 KiB limit (papertrail.web.app.MAX_BODY) for this route.
ROUTE_BODY_CEILING = 1 << 30
# The form has the file; a few more fields (a browser extension's) are tolerated, each up to MAX_FIELD.
MAX_FIELDS = 4
# Entries not used that the page lists (all are counted), as `import library` prints at most 1,000.
MAX_PROBLEMS_SHOWN = 1000
# A citation key shown is cut to this (Zotero's CSL ids are item URIs); file names too.
KEY_LIMIT = 80
# How the page names each format.
FORMAT_NAMES = {"bibtex": "BibTeX", "ris": "RIS", "csl-json": "CSL-JSON"}


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why nothing was imported: the HTTP status, what is wrong and what to do (in the reader's language)."""

    status: int
    text: str
    hint: str = ""


@dataclass(slots=True)
class LibraryRoutes:
    """The upload route of one app, and the subscribers whose import is running in this process."""

    ctx: AppContext
    pages: Pages
    subscribers: SubscriberPages
    running: set[int] = field(default_factory=set)

    def routes(self) -> list[Route]:
        """``POST /manage/{token}/library``."""
        return [
            Route("/manage/{token}/library", self.upload, methods=["POST"], max_body_size=ROUTE_BODY_CEILING)
        ]

    async def upload(self, request: Request) -> Response:
        """Import the uploaded library for the token's subscriber and show what it did."""
        reader = self.pages.reader(request)
        found = await run_in_threadpool(self.subscribers.managed, request.path_params["token"], reader)
        if not isinstance(found, Subscriber):
            return found  # forged, altered or unknown: refused before the body is read
        assert found.id is not None
        reader = reader.with_stored(found.language)
        refused = self._declared(request, reader)
        if refused is None and found.id in self.running:
            refused = Refusal(
                409,
                reader.t.gettext("An import of your library is running already."),
                reader.t.gettext(
                    "Wait for it to finish, then open your manage page: it counts the papers from your "
                    "library."
                ),
            )
        if refused is not None:
            return self._refused(found, reader, refused)
        # No await between the check above and this line: two uploads cannot both pass it.
        self.running.add(found.id)
        try:
            outcome = await self._import(request, found, reader)
        finally:
            self.running.discard(found.id)
        if isinstance(outcome, Refusal):
            return self._refused(found, reader, outcome)
        name, read, report = outcome
        return self._view(found, reader, name, read, report)

    def _declared(self, request: Request, reader: Reader) -> Refusal | None:
        """Refuse a body whose declared length is missing or over the limit, before reading it."""
        length = request.headers.get("content-length", "")
        if not length.isdigit():
            return Refusal(
                411,
                reader.t.gettext("The upload did not say how large it is."),
                reader.t.gettext("Upload the file with the form on your manage page."),
            )
        if int(length) > MAX_UPLOAD_BYTES:
            return self._too_large(reader)
        return None

    def _too_large(self, reader: Reader) -> Refusal:
        t = reader.t
        return Refusal(
            413,
            t.gettext("The file is larger than {limit} MB, the most PaperTrail reads.", limit=_mb()),
            t.gettext("Export one collection at a time, and import each file."),
        )

    async def _import(
        self, request: Request, subscriber: Subscriber, reader: Reader
    ) -> tuple[str, LibraryRead, LibraryReport] | Refusal:
        """Read the form's file, then the library, then import it; or why not."""
        t = reader.t
        nothing = Refusal(
            400,
            t.gettext("No library file was received."),
            t.gettext(
                "Choose your library's export (a .bib, .ris or .json file) on your manage page, then press "
                "Import."
            ),
        )
        try:
            async with request.form(max_files=1, max_fields=MAX_FIELDS, max_part_size=MAX_FIELD) as form:
                upload = form.get("library")
                if not isinstance(upload, UploadFile):
                    return nothing
                data = await upload.read(MAX_FILE_BYTES + 1)
                filename = _base_name(upload.filename or "")
        except (HTTPException, MultiPartException):
            # Not multipart, a second file, too many fields, or a field too long: not this page's form.
            return nothing
        if len(data) > MAX_FILE_BYTES:
            return self._too_large(reader)
        if not data and not filename:
            return nothing  # the form sent without a file chosen
        try:
            # In a worker thread, so that the event loop serves other requests meanwhile; given up (the
            # thread finishes on its own) when the request is cancelled, as at the end of a stop's grace
            # period, so that reading a large file never holds up a stop.
            read = await anyio.to_thread.run_sync(
                partial(read_library, data, filename or None), abandon_on_cancel=True
            )
        except LibraryFileError as exc:
            said = exc.said(t, limit=KEY_LIMIT)  # "the file is empty; export it as …": a sentence here
            return Refusal(
                400,
                said[:1].upper() + said[1:],
                t.gettext("Nothing was imported. Fix the file, or export the library again, and import it."),
            )
        assert subscriber.id is not None
        report = await import_library(self.ctx.db, subscriber.id, read, lookup=self.ctx.api)
        log.info(
            "library import: subscriber %s, %s, %d entries, %d used, %d new",
            subscriber.id,
            report.format,
            report.entries,
            report.used,
            report.added,
        )
        return filename or t.gettext("your file"), read, report

    def _refused(self, subscriber: Subscriber, reader: Reader, refused: Refusal) -> Response:
        return self.pages.render(
            reader,
            "library.html.j2",
            status=refused.status,
            private=True,
            title=reader.t.gettext("Library not imported"),
            refused=refused,
            report=None,
            manage=self.subscribers.manage_path(subscriber.address),
        )

    def _view(
        self, subscriber: Subscriber, reader: Reader, name: str, read: LibraryRead, report: LibraryReport
    ) -> Response:
        t = reader.t
        return self.pages.render(
            reader,
            "library.html.j2",
            private=True,
            title=t.gettext("Library imported"),
            refused=None,
            report=report,
            filename=name,
            format_name=FORMAT_NAMES.get(report.format, report.format),
            # A legacy BibTeX or RIS export: its accented letters may read wrong (core.taste.library_file).
            encoding=read.encoding if read.encoding not in ("utf-8", "utf-16") else "",
            problems=[p.said(t, limit=KEY_LIMIT) for p in report.unused[:MAX_PROBLEMS_SHOWN]],
            more=max(len(report.unused) - MAX_PROBLEMS_SHOWN, 0),
            manage=self.subscribers.manage_path(subscriber.address),
        )


def _base_name(filename: str) -> str:
    """The upload's file name without a folder (some browsers send the whole path), cut to KEY_LIMIT."""
    name = PurePosixPath(filename.replace("\\", "/")).name.strip()
    return name if len(name) <= KEY_LIMIT else name[: KEY_LIMIT - 1] + "…"


def _mb() -> str:
    return f"{MAX_FILE_BYTES / 1e6:,.0f}"
