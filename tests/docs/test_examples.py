"""Every example request of the README and docs/api.md, sent to `scripts/dev` (the demo data the
docs are written against, served by the real stack): each answers as its example says.

The examples are found in the markdown, so a new one is checked without touching this file:

- a request line in a code block, `GET /path` (or `HEAD`), with what it answers beside it or on
  the lines below it: a status (`400 {...}`, `200: ...`), otherwise 2xx; an error's
  `{"detail": ...}` (`...` stands for any text); the record IDs of a plain array
  (`[{"id": 5, ...}, ...]`) or a page (`{"items": [{"id": 3, ...}, ...], "total": 4, ...}`), its
  `total` and `next_cursor`;
- a `` `GET /path` `` in the text, a `curl` of the dev server, a link to it
  (`<http://127.0.0.1:8000/...>`, redirects followed) and the paths beside such a link
  (`` `/bounties/3/overview` ``, or `` `?limit=2` `` after the link's own): 2xx.

Paths with a placeholder (`/bounties/{id}`) are routes, not examples, and are skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.servers import PROJECT_DIR, DevService, start_dev_service

DOCUMENTS = ("README.md", "docs/api.md")
DEV_SERVER = "http://127.0.0.1:8000"

FENCE = re.compile(r"^\s*```")
REQUEST_LINE = re.compile(r"^\s*(GET|HEAD) (/\S*)\s*(.*)$")
ANSWER_LINE = re.compile(r"^\s*(\d{3})\b")
INLINE_REQUEST = re.compile(r"`(GET|HEAD) (/[^`\s]*)`")
CURL = re.compile(r"\bcurl\b[^\n]*?'?" + re.escape(DEV_SERVER) + r"(/[^'\s]*)")
LINK = re.compile(r"<" + re.escape(DEV_SERVER) + r"(/[^>\s]*)>")
BESIDE_LINK = re.compile(r"`([/?][^`\s]*)`")
DETAIL = re.compile(r'\{"detail": "((?:[^"\\]|\\.)*)"\}')
RECORD_ID = re.compile(r'\{"id": (\d+)')


@dataclass
class Example:
    document: str
    line: int
    method: str
    path: str
    answer: str = ""  # what the document shows the request answers, if anything
    status: int | None = None  # the documented status; None: any 2xx

    @property
    def id(self) -> str:
        return f"{self.document}:{self.line} {self.method} {self.path}"


def _in_code_blocks(document: str, lines: list[str]) -> list[Example]:
    examples: list[Example] = []
    inside = False
    current: Example | None = None
    for number, line in enumerate(lines, start=1):
        if FENCE.match(line):
            inside, current = not inside, None
            continue
        if not inside:
            continue
        request = REQUEST_LINE.match(line)
        if request:
            method, path, rest = request.groups()
            current = Example(document, number, method, path, rest)
            examples.append(current)
        elif current is not None and line.strip():
            current.answer += " " + line.strip()  # the answer continued on the next lines
        else:
            current = None
    for example in examples:
        example.answer = example.answer.strip()
        status = ANSWER_LINE.match(example.answer)
        if status:
            example.status = int(status.group(1))
    return examples


def _in_text(document: str, lines: list[str]) -> list[Example]:
    examples = []
    for number, line in enumerate(lines, start=1):
        for method, path in INLINE_REQUEST.findall(line):
            examples.append(Example(document, number, method, path))
        for path in CURL.findall(line):
            examples.append(Example(document, number, "GET", path))
        for link in LINK.findall(line):
            examples.append(Example(document, number, "GET", link))
            for path in BESIDE_LINK.findall(line):
                examples.append(Example(document, number, "GET", link + path if path.startswith("?") else path))
    return examples


def documented_examples() -> list[Example]:
    examples = []
    for document in DOCUMENTS:
        lines = (PROJECT_DIR / document).read_text("utf-8").splitlines()
        found = _in_code_blocks(document, lines) + _in_text(document, lines)
        examples += [example for example in found if "{" not in example.path and "<" not in example.path]
    return examples


EXAMPLES = documented_examples()


def _pattern(documented: str) -> re.Pattern[str]:
    """The documented text as a pattern: `...` and `…` stand for any text."""
    return re.compile(".*".join(re.escape(part) for part in re.split(r"\.\.\.|…", documented)), re.DOTALL)


@pytest.fixture(scope="module")
def dev_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevService]:
    """`scripts/dev --fresh` on ports of its own: the demo chain the docs' examples are written
    against, its indexer and the web server."""
    with start_dev_service(tmp_path_factory.mktemp("dev-state")) as service:
        yield service


def test_the_documents_have_examples() -> None:
    """The extraction finds what the documents show (a change of their style must not silently
    leave every example unchecked)."""
    by_document = {document: [e for e in EXAMPLES if e.document == document] for document in DOCUMENTS}
    assert len(by_document["docs/api.md"]) >= 20
    assert len(by_document["README.md"]) >= 3
    assert any(e.status == 400 for e in EXAMPLES)
    assert any(RECORD_ID.search(e.answer) for e in EXAMPLES)


@pytest.mark.chain
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda example: example.id)
def test_the_example_answers_as_documented(dev_service: DevService, example: Example) -> None:
    response = httpx.request(example.method, dev_service.url + example.path, follow_redirects=True, timeout=30)
    if example.status is not None:
        assert response.status_code == example.status, response.text[:500]
    else:
        assert 200 <= response.status_code < 300, response.text[:500]
    if example.method == "HEAD" or not response.headers.get("content-type", "").startswith("application/json"):
        return
    body = response.json()
    answer = example.answer
    detail = DETAIL.search(answer)
    if detail:
        assert _pattern(detail.group(1)).fullmatch(body["detail"]), body
    shown = [int(record_id) for record_id in RECORD_ID.findall(answer)]
    if answer.startswith("[") and shown:
        assert [record["id"] for record in body] == shown
    elif answer.startswith('{"items": [') and shown:
        assert [record["id"] for record in body["items"]] == shown
    if answer.startswith('{"items":'):
        for member in ("total", "cursor", "next_cursor"):
            value = re.search(rf'"{member}": (null|\d+|"\d+")', answer)
            if value:
                assert body[member] == json.loads(value.group(1)), (member, body)
