"""`kvlint lsp` driven by a real LSP client (pytest-lsp, on pygls), as two editors drive it:
VS Code (diagnostics pushed, positions in UTF-16) and Neovim 0.11 (diagnostics pulled,
positions in UTF-8), with each editor's own capabilities.

Open, change (incremental edits), save (a configuration edited in the editor), watched-file
changes, hover and code actions on templates, session files and a cassette written here or taken
from the repository's fixtures; expected ranges are computed here from the text, in the encoding
the server and client agreed on, or read from `kvlint check --format json` on the same file.
"""

import asyncio
import collections
import json
import os
import pathlib
import shutil
import subprocess
import tomllib

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
KVLINT = os.environ.get("KVLINT", str(REPOSITORY / "target" / "debug" / "kvlint"))
FIXTURES = REPOSITORY / "fixtures" / "rules"
# The project's address: the workspace's `repository`, which every link is derived from.
REPOSITORY_URL = tomllib.loads((REPOSITORY / "Cargo.toml").read_text())["workspace"]["package"]["repository"]

# VS Code 1.65 (pushed diagnostics), Neovim 0.11 (pulled, UTF-8), and VS Code as it is since
# 1.67: pulling, and pulling again when the server asks (`workspace/diagnostic/refresh`).
EDITORS = ["visual-studio-code", "neovim@v0.11.0", "visual-studio-code+pull"]

# The longest a test waits for the server to publish diagnostics.
PUBLISH_TIMEOUT = 30


def capabilities(editor: str) -> types.ClientCapabilities:
    name, _, pull = editor.partition("+")
    capabilities = client_capabilities(name)
    if pull:
        capabilities.text_document.diagnostic = types.DiagnosticClientCapabilities(
            dynamic_registration=False, related_document_support=False
        )
        capabilities.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    return capabilities


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[KVLINT, "lsp"]), params=EDITORS)
async def client(lsp_client: LanguageClient, request):
    params = types.InitializeParams(capabilities=capabilities(request.param))
    lsp_client.registrations = []

    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams):
        # What the editor does with it: watch the files, tell the server of changes.
        lsp_client.registrations.extend(params.registrations)

    # Every publication kept in order, per document. (pytest-lsp's `wait_for_notification`
    # resolves one waiter per method: a second publication read in the same burst, for another
    # document or a newer version, would be lost and its waiter would wait forever.)
    lsp_client.published = collections.defaultdict(asyncio.Queue)
    features = lsp_client.protocol.fm.features
    record_default = features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def published(params: types.PublishDiagnosticsParams):
        record_default(params)
        lsp_client.published[params.uri].put_nowait(params)

    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = published

    result = await lsp_client.initialize_session(params)
    encoding = result.capabilities.position_encoding
    lsp_client.encoding = getattr(encoding, "value", encoding) or "utf-16"
    lsp_client.pulls = params.capabilities.text_document.diagnostic is not None
    yield
    await lsp_client.shutdown_session()


# --- helpers: documents, positions in the agreed encoding, diagnostics pushed or pulled ---


def width(text: str, encoding: str) -> int:
    """The length of `text` in the units positions count."""
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    return len(text.encode("utf-16-le")) // 2


def position(text: str, offset: int, encoding: str) -> types.Position:
    """The position of character `offset` of `text`."""
    before = text[:offset]
    line = before.count("\n")
    return types.Position(line=line, character=width(before[before.rfind("\n") + 1 :], encoding))


def offset(text: str, at: types.Position, encoding: str) -> int:
    """The character offset of a position in `text`."""
    lines = text.split("\n")
    start = sum(len(line) + 1 for line in lines[: at.line])
    line = lines[at.line]
    counted = 0
    for index, character in enumerate(line):
        if counted >= at.character:
            return start + index
        counted += width(character, encoding)
    return start + len(line)


def apply(text: str, edits, encoding: str) -> str:
    """The text with a client's edits applied (last first, as their ranges are the original's)."""
    places = [
        (offset(text, edit.range.start, encoding), offset(text, edit.range.end, encoding), edit.new_text)
        for edit in edits
    ]
    for start, end, new_text in sorted(places, reverse=True):
        text = text[:start] + new_text + text[end:]
    return text


class Document:
    """A document open in the client, its text and version kept as the editor keeps them."""

    def __init__(self, client: LanguageClient, path: pathlib.Path, language: str = "plaintext"):
        self.client = client
        self.path = path
        self.uri = path.as_uri()
        self.text = path.read_text()
        self.version = 1
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=self.uri, language_id=language, version=self.version, text=self.text
                )
            )
        )

    async def diagnostics(self) -> list[types.Diagnostic]:
        """The diagnostics of the current version: pulled, or the next ones pushed for it."""
        if self.client.pulls:
            report = await asyncio.wait_for(
                self.client.text_document_diagnostic_async(
                    types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=self.uri))
                ),
                PUBLISH_TIMEOUT,
            )
            assert report.kind == "full"
            return list(report.items)
        publications = self.client.published[self.uri]
        while True:
            published = await asyncio.wait_for(publications.get(), PUBLISH_TIMEOUT)
            if published.version == self.version:
                return list(published.diagnostics)

    async def published_nothing(self) -> bool:
        """Whether nothing new was pushed for this document once the server has handled all
        that was sent to it: after two round trips, as a burst's publications go out before
        the next burst's answers."""
        for _ in range(2):
            await asyncio.wait_for(self.hover(types.Position(line=0, character=0)), PUBLISH_TIMEOUT)
        return self.client.published[self.uri].empty()

    def edit(self, edits) -> None:
        """Sends `edits` (text edits, as a code action gives them) as incremental changes."""
        self.version += 1
        changes = [
            types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text)
            for edit in sorted(edits, key=lambda edit: (edit.range.start.line, edit.range.start.character), reverse=True)
        ]
        self.text = apply(self.text, edits, self.client.encoding)
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
                content_changes=changes,
            )
        )

    def range_of(self, needle: str, occurrence: int = 0) -> types.Range:
        start = -1
        for _ in range(occurrence + 1):
            start = self.text.index(needle, start + 1)
        encoding = self.client.encoding
        return types.Range(
            start=position(self.text, start, encoding), end=position(self.text, start + len(needle), encoding)
        )

    async def hover(self, at: types.Position):
        return await self.client.text_document_hover_async(
            types.HoverParams(text_document=types.TextDocumentIdentifier(uri=self.uri), position=at)
        )

    async def actions(self, diagnostic: types.Diagnostic) -> list[types.CodeAction]:
        return await self.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=self.uri),
                range=diagnostic.range,
                context=types.CodeActionContext(diagnostics=[diagnostic]),
            )
        )


def params_dynamic(client: LanguageClient) -> bool:
    """Whether the client takes file watchers registered by the server."""
    watched = client.capabilities.workspace.did_change_watched_files
    return bool(watched and watched.dynamic_registration)


def changed(client: LanguageClient, path: pathlib.Path, change: types.FileChangeType) -> None:
    """Tells the server a watched file changed, as the editor's file watcher does."""
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=path.as_uri(), type=change)])
    )


def kvlint_check(path: pathlib.Path) -> dict:
    """`kvlint check --format json` on a file: what the command line reports of it."""
    run = subprocess.run([KVLINT, "check", str(path), "--format", "json"], capture_output=True, text=True)
    assert run.returncode in (0, 1), run.stderr
    return json.loads(run.stdout)


# --- templates ---

TEMPLATE = (
    "🕒 Zeit für Team Ölberg: {{ current_time }}.\n"
    "You are the billing assistant. Answer in the house style: short sentences, cite the policy.\n"
    "\n"
    "## Policies\n"
    "{{ policies }}\n"
)


async def test_a_volatile_variable_is_reported_at_its_exact_range(client: LanguageClient, tmp_path):
    path = tmp_path / "billing.j2"
    path.write_text(TEMPLATE)
    document = Document(client, path, "jinja")
    diagnostics = await document.diagnostics()
    assert [diagnostic.code for diagnostic in diagnostics] == ["KV101"]
    [found] = diagnostics
    # After an emoji (two UTF-16 units, four UTF-8 bytes) and an umlaut.
    assert found.range == document.range_of("{{ current_time }}")
    assert found.severity == types.DiagnosticSeverity.Error
    assert found.source == "kvlint"
    assert found.code_description.href == f"{REPOSITORY_URL}/blob/main/docs/rules/volatile-timestamp.md"
    assert (REPOSITORY / "docs" / "rules" / "volatile-timestamp.md").is_file()


async def test_moving_the_line_to_the_end_removes_the_error(client: LanguageClient, tmp_path):
    path = tmp_path / "billing.j2"
    path.write_text(TEMPLATE)
    document = Document(client, path, "jinja")
    [found] = await document.diagnostics()
    actions = await document.actions(found)
    titles = [action.title for action in actions]
    move = next(action for action in actions if action.title.startswith("Move line 1"))
    assert move.is_preferred, titles
    assert any("kvlint: ignore" in title for title in titles), titles
    document.edit(move.edit.changes[document.uri])
    # The edit moved the line, and kept every other line.
    assert document.text.splitlines()[-1].startswith("🕒 Zeit")
    assert sorted(document.text.splitlines()) == sorted(TEMPLATE.splitlines())
    assert await document.diagnostics() == []


async def test_the_ignore_comment_removes_the_error(client: LanguageClient, tmp_path):
    path = tmp_path / "support.hbs"
    path.write_text("Request {{request_id}} for the support desk.\nFollow the escalation policy below.\n{{policy}}\n")
    document = Document(client, path, "handlebars")
    [found] = await document.diagnostics()
    assert found.code == "KV102"
    [ignore] = [action for action in await document.actions(found) if "ignore" in action.title]
    document.edit(ignore.edit.changes[document.uri])
    assert "{{! kvlint: ignore[volatile-id] }}" in document.text.splitlines()[0]
    assert await document.diagnostics() == []


async def test_typing_a_volatile_variable_then_undoing_it(client: LanguageClient, tmp_path):
    path = tmp_path / "stable.j2"
    path.write_text("You are a careful assistant.\nAlways answer in English.\n")
    document = Document(client, path, "jinja")
    assert await document.diagnostics() == []
    start = types.Position(line=0, character=0)
    document.edit([types.TextEdit(range=types.Range(start=start, end=start), new_text="It is {{ now }}. ")])
    [found] = await document.diagnostics()
    assert found.code == "KV101"
    assert found.range == document.range_of("{{ now }}")
    typed = types.Range(start=start, end=position(document.text, len("It is {{ now }}. "), client.encoding))
    document.edit([types.TextEdit(range=typed, new_text="")])
    assert await document.diagnostics() == []


async def test_configuration_changes_are_picked_up(client: LanguageClient, tmp_path):
    path = tmp_path / "greeting.j2"
    path.write_text("Greeting: {{ greeting_line }}\nYou are the concierge. Be brief and polite.\n")
    document = Document(client, path, "jinja")
    assert await document.diagnostics() == []
    if params_dynamic(client):
        # The server asked to be told of configuration files.
        patterns = [
            watcher["globPattern"]
            for registration in client.registrations
            for watcher in registration.register_options["watchers"]
        ]
        assert patterns == ["**/kvlint.toml", "**/pyproject.toml"]
    config = tmp_path / "kvlint.toml"
    config.write_text('volatile = ["greeting_line"]\n')
    refreshes = client.diagnostic_refresh_count
    changed(client, config, types.FileChangeType.Created)
    workspace_diagnostics = client.capabilities.workspace.diagnostics
    if workspace_diagnostics and workspace_diagnostics.refresh_support:
        # The server asks a client that pulls to pull again.
        for _ in range(250):
            if client.diagnostic_refresh_count > refreshes:
                break
            await asyncio.sleep(0.02)
        assert client.diagnostic_refresh_count > refreshes
    [found] = await document.diagnostics()
    assert found.range == document.range_of("{{ greeting_line }}")
    # A broken configuration is said on the document, naming the file.
    config.write_text("volatile = [\n")
    changed(client, config, types.FileChangeType.Changed)
    [problem] = await document.diagnostics()
    assert "kvlint.toml" in problem.message
    assert problem.severity == types.DiagnosticSeverity.Error


# --- sessions ---


async def test_a_session_break_with_its_turn_hover_and_related_turn(client: LanguageClient, tmp_path):
    path = tmp_path / "session.jsonl"
    shutil.copy(FIXTURES / "volatile-timestamp" / "fail" / "system-date-midnight.jsonl", path)
    document = Document(client, path, "jsonl")
    diagnostics = await document.diagnostics()
    reported = kvlint_check(path)["sessions"][0]["findings"]
    assert [diagnostic.code for diagnostic in diagnostics] == [finding["code"] for finding in reported]
    found, expected = diagnostics[0], reported[0]
    # The command line's span (1-based lines, columns in characters), in the agreed encoding.
    lines = document.text.split("\n")
    span = expected["span"]
    start_line = lines[span["line"] - 1]
    assert found.range.start == types.Position(
        line=span["line"] - 1, character=width(start_line[: span["column"] - 1], client.encoding)
    )
    # The bytes this turn changed, in the turn before: from the first character where the
    # earlier turn's line stops being the later one's.
    [related] = found.related_information
    earlier, later = lines[span["line"] - 2], lines[span["line"] - 1]
    same = len(os.path.commonprefix([earlier, later]))
    assert related.location.range.start == types.Position(
        line=span["line"] - 2, character=width(earlier[:same], client.encoding)
    )
    assert related.location.range.end != related.location.range.start
    # Turns counted as the command line's JSON report counts them.
    assert related.message.startswith(f"turn {expected['turn'] - 1}:"), related.message
    hover = await document.hover(found.range.start)
    text = hover.contents.value
    assert f"turn {expected['turn'] - 1} (cached)" in text, text
    assert f"turn {expected['turn']} (sent)" in text, text
    assert f"{expected['tokens_lost']} tokens lost" in text
    assert expected["previous_window"] in text
    assert expected["current_window"] in text
    assert "```text" in text


async def test_sorting_a_fixtures_tools_removes_the_break(client: LanguageClient, tmp_path):
    path = tmp_path / "mcp.jsonl"
    shutil.copy(FIXTURES / "tool-order" / "fail" / "mcp-hashmap-swap.jsonl", path)
    document = Document(client, path, "jsonl")
    diagnostics = await document.diagnostics()
    order = [diagnostic for diagnostic in diagnostics if diagnostic.code == "KV201"]
    assert order, diagnostics
    [sort] = [action for action in await document.actions(order[0]) if action.title.startswith("Sort the tools")]
    document.edit(sort.edit.changes[document.uri])
    # Every turn now sends its tools sorted by name, each tool's bytes as they were.
    for line in document.text.splitlines():
        names = [tool["function"]["name"] for tool in json.loads(line)["tools"]]
        assert names == sorted(names)
    assert [d.code for d in await document.diagnostics() if d.code == "KV201"] == []
    path.write_text(document.text)
    assert all(finding["code"] != "KV201" for finding in kvlint_check(path)["sessions"][0]["findings"])


async def test_a_session_that_stops_parsing_says_where(client: LanguageClient, tmp_path):
    path = tmp_path / "session.jsonl"
    shutil.copy(FIXTURES / "tool-order" / "fail" / "mcp-hashmap-swap.jsonl", path)
    document = Document(client, path, "jsonl")
    assert await document.diagnostics()
    # The second line's first colon becomes `=`.
    second = document.text.split("\n")[1]
    colon = second.index(":")
    at = types.Range(
        start=types.Position(line=1, character=width(second[:colon], client.encoding)),
        end=types.Position(line=1, character=width(second[: colon + 1], client.encoding)),
    )
    document.edit([types.TextEdit(range=at, new_text="=")])
    [problem] = await document.diagnostics()
    assert problem.severity == types.DiagnosticSeverity.Error
    assert problem.range.start == at.start, problem
    assert "session.jsonl:2:" in problem.message
    # Put it back: the findings return.
    document.edit([types.TextEdit(range=at, new_text=":")])
    assert any(diagnostic.code == "KV201" for diagnostic in await document.diagnostics())


async def test_a_line_broken_while_typing_keeps_the_earlier_turns_findings(client: LanguageClient, tmp_path):
    path = tmp_path / "session.jsonl"
    shutil.copy(FIXTURES / "volatile-timestamp" / "fail" / "system-date-midnight.jsonl", path)
    document = Document(client, path, "jsonl")
    before = await document.diagnostics()
    [expected] = kvlint_check(path)["sessions"][0]["findings"]
    # The line after the break's: its first key loses its closing quote, as when typing.
    line = expected["turn"] + 1
    text = document.text.split("\n")[line]
    quote = text.index('":')
    at = types.Range(
        start=types.Position(line=line, character=width(text[:quote], client.encoding)),
        end=types.Position(line=line, character=width(text[: quote + 1], client.encoding)),
    )
    document.edit([types.TextEdit(range=at, new_text="")])
    diagnostics = await document.diagnostics()
    assert [d for d in diagnostics if d.code] == before, diagnostics
    [problem] = [d for d in diagnostics if not d.code]
    assert problem.severity == types.DiagnosticSeverity.Error
    assert problem.range.start.line == line, problem
    assert f"session.jsonl:{line + 1}:" in problem.message


def test_exit_without_shutdown_exits_1():
    """The protocol: `exit` exits 0 after `shutdown`, 1 without it."""

    def framed(message: dict) -> bytes:
        body = json.dumps(message).encode()
        return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)

    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}
    initialized = {"jsonrpc": "2.0", "method": "initialized", "params": {}}
    shutdown = {"jsonrpc": "2.0", "id": 2, "method": "shutdown"}
    exit_ = {"jsonrpc": "2.0", "method": "exit"}
    for messages, code in [([initialize, initialized, exit_], 1), ([initialize, initialized, shutdown, exit_], 0)]:
        run = subprocess.run(
            [KVLINT, "lsp"], input=b"".join(map(framed, messages)), capture_output=True, timeout=PUBLISH_TIMEOUT
        )
        assert run.returncode == code, (messages[-2]["method"], run.stderr)


async def test_a_cassette_is_checked_where_its_body_is(client: LanguageClient, tmp_path):
    path = tmp_path / "cassette.yaml"
    shutil.copy(REPOSITORY / "fixtures" / "recordings" / "hand-made" / "timestamp-in-system.yaml", path)
    document = Document(client, path, "yaml")
    diagnostics = await document.diagnostics()
    reported = kvlint_check(path)["sessions"][0]["findings"]
    # Its prompts, sent to api.openai.com, are under OpenAI's 1,024-token minimum: KV505 for
    # the session, then the timestamp's KV101 at its turn.
    assert [diagnostic.code for diagnostic in diagnostics] == [finding["code"] for finding in reported]
    assert [finding["code"] for finding in reported] == ["KV505", "KV101"]
    timestamp = next(diagnostic for diagnostic in diagnostics if diagnostic.code == "KV101")
    assert timestamp.range.start.line == reported[1]["span"]["line"] - 1


async def test_other_json_is_passed_over(client: LanguageClient, tmp_path):
    path = tmp_path / "package.json"
    path.write_text('{"name": "not-a-session", "version": "1.0.0"}\n')
    document = Document(client, path, "json")
    assert await document.diagnostics() == []


async def test_restoring_a_fixtures_cached_text_removes_the_break(client: LanguageClient, tmp_path):
    path = tmp_path / "session.jsonl"
    shutil.copy(FIXTURES / "volatile-timestamp" / "fail" / "system-date-midnight.jsonl", path)
    document = Document(client, path, "jsonl")
    [found] = [diagnostic for diagnostic in await document.diagnostics() if diagnostic.code == "KV101"]
    [restore] = [action for action in await document.actions(found) if action.title.startswith("Restore")]
    document.edit(restore.edit.changes[document.uri])
    # Every line is still a JSON body, and every turn sends the earlier turn's system prompt.
    bodies = [json.loads(line) for line in document.text.splitlines() if line.strip()]
    assert len({json.dumps(body["messages"][0]) for body in bodies}) == 1
    assert await document.diagnostics() == []


async def test_a_configuration_edited_and_saved_in_the_editor_applies(client: LanguageClient, tmp_path):
    path = tmp_path / "greeting.j2"
    path.write_text("Greeting: {{ greeting_line }}\nYou are the concierge. Be brief and polite.\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "concierge"\n')
    document = Document(client, path, "jinja")
    assert await document.diagnostics() == []
    # pyproject.toml open in the editor, `[tool.kvlint]` typed in: nothing applies, and nothing
    # is analysed again (configurations are read from disk) until it is saved.
    config = Document(client, tmp_path / "pyproject.toml", "toml")
    end = position(config.text, len(config.text), client.encoding)
    addition = '\n[tool.kvlint]\nvolatile = ["greeting_line"]\n'
    config.edit([types.TextEdit(range=types.Range(start=end, end=end), new_text=addition)])
    if client.pulls:
        assert await document.diagnostics() == []
    else:
        assert await document.published_nothing()
    # Saved.
    (tmp_path / "pyproject.toml").write_text(config.text)
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=config.uri))
    )
    [found] = await document.diagnostics()
    # A variable the configuration names volatile is reported by volatile-counter.
    assert found.code == "KV103"
    assert found.range == document.range_of("{{ greeting_line }}")
