"""The manage page's library upload (papertrail/web/library.py): the form, the result page with its counts
and every entry not used, the seeds stored, the bounds on the upload (refused before reading, with a page),
forged links, one import at a time, escaping and the Chinese page; over the recorded arXiv day, on SQLite
and PostgreSQL, through Starlette's test client."""

from __future__ import annotations

import asyncio
import html
import re
import threading
import warnings
from typing import Any

import httpx
import markupsafe
import pytest

from core.db import Database
from core.follows import subscriber_records
from core.people import tokens
from core.taste import taste_records
from core.taste.library_file import MAX_FILE_BYTES, LibraryRead, read_library
from papertrail.web import library as web_library
from papertrail.web.app import build_app
from papertrail.web.library import MAX_UPLOAD_BYTES, LibraryRoutes
from tests.support.library_files import LIBRARY, _reader
from tests.support.web import KEY, client_for, web_context
from tests.support.web_headers import assert_secured

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette 1.x suggests httpx2 for its test client
    from starlette.testclient import TestClient

ADDRESS = "email:ada@example.org"


def _manage(address: str = ADDRESS) -> str:
    return f"/manage/{tokens.sign(KEY, tokens.MANAGE, address)}"


def _upload(client: TestClient, name: str, data: bytes | None = None, *, path: str | None = None) -> Any:
    body = (LIBRARY / name).read_bytes() if data is None else data
    return client.post(
        f"{path or _manage()}/library", files={"library": (name, body, "application/octet-stream")}
    )


def _seeds(db: Database, sid: int) -> int:
    return taste_records.vote_counts(db, sid)[2]


def _main(page: str) -> str:
    """The page's main text, tags removed and entities read, on one line per block."""
    main = page.split("<main", 1)[1].split(">", 1)[1].split("</main>", 1)[0]
    return html.unescape(re.sub(r"<[^>]+>", "", main))


def test_the_manage_page_has_the_form(db: Database) -> None:
    _reader(db)
    page = client_for(db).get(_manage())
    assert page.status_code == 200
    form = re.search(r"<form [^>]*data-library-upload[^>]*>.*?</form>", page.text, flags=re.S)
    assert form is not None
    assert f'action="{_manage()}/library"' in form[0] and 'enctype="multipart/form-data"' in form[0]
    assert '<input type="file" name="library" accept=".bib,.ris,.json" required>' in form[0]
    assert "at most 5 MB" in page.text


def test_a_zotero_export_is_imported_counted_and_shown(db: Database) -> None:
    sid = _reader(db)
    client = client_for(db)
    response = _upload(client, "zotero.bib")
    assert response.status_code == 200
    assert_secured(response)
    assert response.headers["cache-control"] == "no-store"
    text = _main(response.text)
    assert "Library imported" in text and "zotero.bib (BibTeX): 4 of 5 entries used." in text
    # lookup is None in the test app: the old-style id PaperTrail has not stored is used by its abstract.
    assert 'data-counts="2 0 1 1 4"' in response.text
    for line in (
        "2 papers PaperTrail had stored",
        "1 paper found by its DOI",
        "1 entry used by its title and abstract",
        "4 papers are new in your library.",
        "1 entry not used",
        "entry li_streamlining_2024 (line 57): no arXiv id, no DOI, and no abstract to learn from",
    ):
        assert line in text, line
    assert f'href="{_manage()}#library"' in response.text
    assert _seeds(db, sid) == 4
    # The manage page counts them; a second upload adds nothing and says so.
    assert 'data-vote-counts="0 0 4"' in client.get(_manage()).text
    again = _main(_upload(client, "zotero.bib").text)
    assert "0 papers are new in your library. 4 were imported before." in " ".join(again.split())
    assert _seeds(db, sid) == 4


def test_a_broken_file_lists_every_problem_and_keeps_its_good_entries(sqlite_store: Database) -> None:
    sid = _reader(sqlite_store)
    response = _upload(client_for(sqlite_store), "broken.ris")
    assert response.status_code == 200
    text = _main(response.text)
    assert "broken.ris (RIS): 2 of 5 entries used." in text and "3 entries not used" in text
    problems = re.findall(r'<li class="reason">(.*?)</li>', response.text)
    assert [html.unescape(p) for p in problems] == [
        "entry #2 (line 10): the record does not end with an ER line (the file may be cut short)",
        "line 25: lines outside a record: a RIS record starts with a TY line",
        "entry #4 (line 31): the record does not end with an ER line (the file may be cut short)",
    ]
    assert _seeds(sqlite_store, sid) == 2


def test_what_the_file_says_is_escaped_and_long_keys_are_cut(sqlite_store: Database) -> None:
    _reader(sqlite_store)
    key = "<b>" + "k" * 200
    data = f"@misc{{{key},\n  title = {{<script>alert(1)</script>}}\n}}\n".encode()
    response = _upload(client_for(sqlite_store), "<img src=x>.bib", data)
    assert response.status_code == 200
    assert "<script>" not in response.text and "<b>" not in response.text and "<img" not in response.text
    assert str(markupsafe.escape("<img src=x>.bib")) in response.text
    (problem,) = re.findall(r'<li class="reason">(.*?)</li>', response.text)
    shown = html.unescape(problem)
    assert shown.startswith("entry <b>kkk") and "k" * 100 not in shown and "…" in shown


@pytest.mark.parametrize(
    ("name", "data", "says"),
    [
        ("notes.txt", b"just some notes\n", "This is not a BibTeX, RIS or CSL-JSON file; export it as"),
        (
            "deep.json",
            b'[{"type": "article", "title": "A", "note": ' + b"[" * 65 + b"]" * 65 + b"}]",
            "The file is nested too deeply (more than 64 arrays or objects inside each other)",
        ),
        ("follows.json", b'[{"address": "console:a", "query": "x"}]', "The file is JSON but not CSL-JSON"),
        ("empty.bib", b"", "The file is empty"),
        ("notes.bib", b"just some notes\n", "The file has no entries"),
    ],
)
def test_a_file_that_is_not_a_library_is_refused_with_what_to_do(
    sqlite_store: Database, name: str, data: bytes, says: str
) -> None:
    sid = _reader(sqlite_store)
    response = _upload(client_for(sqlite_store), name, data)
    assert response.status_code == 400 and 'data-refused="400"' in response.text
    text = _main(response.text)
    assert "Library not imported" in text and says in text and "Nothing was imported." in text
    assert _seeds(sqlite_store, sid) == 0


def test_a_too_large_upload_is_refused_with_a_page_and_nothing_stored(db: Database) -> None:
    sid = _reader(db)
    client = client_for(db)
    # The declared length is over the limit: refused before the body is read.
    big = _upload(client, "big.bib", b"%" * (MAX_UPLOAD_BYTES + 1))
    # The body fits the limit, the file does not: refused after reading MAX_FILE_BYTES + 1 bytes of it.
    just = _upload(client, "just.bib", b"@misc{a,\n title = {x}\n}\n" + b"%" * MAX_FILE_BYTES)
    for response in (big, just):
        assert response.status_code == 413 and 'data-refused="413"' in response.text
        assert_secured(response)
        text = _main(response.text)
        assert "The file is larger than 5 MB, the most PaperTrail reads." in text
        assert "Export one collection at a time, and import each file." in text
    assert _seeds(db, sid) == 0
    # A body that does not declare its length is not read either.
    chunked = client.post(
        f"{_manage()}/library",
        content=iter([b"--x\r\n", b"..."]),
        headers={"content-type": "multipart/form-data; boundary=x"},
    )
    assert chunked.status_code == 411 and "did not say how large it is" in chunked.text


def test_a_post_that_is_not_the_form_is_refused(sqlite_store: Database) -> None:
    _reader(sqlite_store)
    client = client_for(sqlite_store)
    path = f"{_manage()}/library"
    for response in (
        client.post(path, data={"library": "not a file"}),
        client.post(path, files={"other": ("a.bib", b"@misc{a, title={x}}", "text/plain")}),
        client.post(path, files=[("library", ("a.bib", b"x", "text/plain"))] * 2),
    ):
        assert response.status_code == 400 and "No library file was received." in response.text
        assert_secured(response)
    assert client.get(path).status_code == 405


def test_forged_and_wrong_purpose_links_are_refused(db: Database) -> None:
    sid = _reader(db)
    client = client_for(db)
    token = tokens.sign(KEY, tokens.MANAGE, ADDRESS)
    for path in (
        f"/manage/{token[:-2]}xx",  # altered
        f"/manage/{tokens.sign('another-key-0123456789abcdef', tokens.MANAGE, ADDRESS)}",  # another key
        f"/manage/{tokens.sign(KEY, tokens.UNSUBSCRIBE, ADDRESS)}",  # made for something else
    ):
        response = _upload(client, "zotero.bib", path=path)
        assert response.status_code == 400 and "This link is not valid" in response.text
        assert_secured(response)
    gone = _upload(client, "zotero.bib", path=_manage("email:nobody@example.org"))
    assert gone.status_code == 404
    assert _seeds(db, sid) == 0


def test_one_import_per_subscriber_at_a_time(sqlite_store: Database) -> None:
    sid = _reader(sqlite_store)
    app = build_app(web_context(sqlite_store, secret_key=KEY))
    (route,) = [r for r in app.routes if getattr(r, "path", "") == "/manage/{token}/library"]
    routes: LibraryRoutes = route.endpoint.__self__  # type: ignore[attr-defined]
    client = TestClient(app)
    routes.running.add(sid)  # an import of this subscriber is under way
    busy = _upload(client, "zotero.bib")
    assert busy.status_code == 409 and "An import of your library is running already." in busy.text
    assert _seeds(sqlite_store, sid) == 0
    routes.running.discard(sid)
    assert _upload(client, "zotero.bib").status_code == 200 and not routes.running
    assert _seeds(sqlite_store, sid) == 4


def test_the_page_speaks_chinese_to_a_chinese_reader(sqlite_store: Database) -> None:
    sid = _reader(sqlite_store)
    subscriber_records.update_subscriber(sqlite_store, sid, language="zh")
    client = client_for(sqlite_store)
    page = client.get(_manage()).text
    assert "导入你的文献库" in page and "最大 5 MB" in page
    response = _upload(client, "zotero.bib")
    assert response.status_code == 200 and response.headers["content-language"] == "zh-Hans"
    text = _main(response.text)
    for line in (
        "文献库已导入",
        "zotero.bib（BibTeX）：5 个条目中采用了 4 个。",
        "2 篇 PaperTrail 已收录的论文",
        "你的文献库新增了 4 篇论文。",
        "没有 arXiv 编号、没有 DOI，也没有可供学习的摘要",
        "返回你的订阅",
    ):
        assert line in text, line
    assert "entries" not in text and "no abstract" not in text
    refused = _main(_upload(client, "notes.bib", b"notes\n").text)
    assert "文献库未导入" in refused and "没有导入任何内容" in refused
    too_large = _main(_upload(client, "big.bib", b"%" * (MAX_UPLOAD_BYTES + 1)).text)
    assert "文件大于 5 MB" in too_large


class _Gate:
    """Holds a worker thread at one step of an upload until the test lets it go (at most 30 s)."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.opened = threading.Event()
        self.opened_in_time: bool | None = None

    def hold(self) -> None:
        self.reached.set()
        self.opened_in_time = self.opened.wait(30)


async def test_healthz_answers_while_an_upload_is_read_and_a_cancel_does_not_wait_for_it(
    sqlite_store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reading of an upload runs off the event loop: /healthz answers while it is under way (a reading
    on the loop would block it, and the gate would time out), and cancelling the request, as a stop does
    after its grace period, ends it at once while the reading still runs. The file is hostile (1 MB of
    display math that never closes), read for real once the gate opens."""
    sid = _reader(sqlite_store)
    gate = _Gate()

    def held_read(data: bytes, filename: str | None = None) -> LibraryRead:
        gate.hold()
        return read_library(data, filename)

    monkeypatch.setattr(web_library, "read_library", held_read)
    app = build_app(web_context(sqlite_store, secret_key=KEY))
    hostile = ("@article{k,\n  title = {" + "\\[" * 500_000 + "},\n  eprint = {2306.03564}\n}\n").encode()
    files = {"library": ("hostile.bib", hostile, "application/octet-stream")}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        upload = asyncio.create_task(client.post(f"{_manage()}/library", files=files))
        assert await asyncio.to_thread(gate.reached.wait, 30)
        health = await client.get("/healthz")
        assert (health.status_code, health.text) == (200, "ok")
        gate.opened.set()
        page = await upload
        assert gate.opened_in_time, "the reading held the event loop: /healthz could not answer"
        assert page.status_code == 200 and "hostile.bib" in page.text

        # A stop's cancel: the request ends while its reading is still held in its thread.
        gate = _Gate()
        cancelled = asyncio.create_task(client.post(f"{_manage()}/library", files=files))
        assert await asyncio.to_thread(gate.reached.wait, 30)
        cancelled.cancel()
        done, _ = await asyncio.wait({cancelled}, timeout=20)
        held = gate.opened_in_time is None
        gate.opened.set()
        assert done and held, "cancelling the upload waited for its reading to finish"
    assert _seeds(sqlite_store, sid) == 1
