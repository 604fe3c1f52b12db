"""Shared helpers of scripts/make-agent-fixtures.py: ids, text padding, the usage and cache
models, and the HAR recording being written."""

import hashlib
import json
from datetime import datetime, timedelta, timezone

KINDS = ("main-turn", "tool-round-trip", "retry", "side-call", "sub-agent", "compaction")


# --- helpers -------------------------------------------------------------------------------


def tokens(text):
    """About four characters a token."""
    return (len(text) + 3) // 4


def ident(seed, length=24, alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"):
    """A deterministic id of `length` characters drawn from `alphabet`."""
    number = int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big")
    out = []
    for _ in range(length):
        number, digit = divmod(number, len(alphabet))
        out.append(alphabet[digit])
    return "".join(out)


def uuid(seed):
    hexa = hashlib.sha256(seed.encode()).hexdigest()
    return f"{hexa[:8]}-{hexa[8:12]}-4{hexa[13:16]}-a{hexa[17:20]}-{hexa[20:32]}"


def compact(value):
    """A body as the SDKs send it: compact JSON, UTF-8 kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def long_prompt(opening, heading, rules, words=1500):
    """`opening`, then the rules under `heading`, repeated until the whole has `words` words:
    a system prompt long enough to matter for caching."""
    lines = [opening.rstrip("\n"), "", heading]
    count = len(opening.split()) + len(heading.split())
    index = 0
    while count < words:
        rule = rules[index % len(rules)]
        lines.append(f"- {rule}")
        count += len(rule.split())
        index += 1
    return "\n".join(lines)


def common_prefix(a, b):
    size = min(len(a), len(b))
    index = 0
    while index < size and a[index] == b[index]:
        index += 1
    return index


class PrefixCache:
    """OpenAI's automatic prompt cache: the longest prefix an earlier request of the
    organization shared, read in steps of 128 tokens from 1,024 on."""

    def __init__(self):
        self.seen = []

    def cached(self, rendered):
        best = max((common_prefix(seen, rendered) for seen in self.seen), default=0)
        self.seen.append(rendered)
        shared = tokens(rendered[:best]) if best else 0
        return (shared // 128) * 128 if shared >= 1024 else 0


class BreakpointCache:
    """Anthropic's (and Bedrock's) cache: an entry written at each breakpoint of a request,
    read by a later request whose prefix up to its last breakpoint starts with it. Segments
    are rendered in the order the prompt is: tools, system, messages."""

    def __init__(self, minimum=1024):
        self.minimum = minimum
        self.written = set()

    def usage(self, segments, answered=True):
        """(uncached input, read, written) for a request of `segments` [(text, breakpoint)]."""
        prefixes = []
        rendered = ""
        for text, breakpoint in segments:
            rendered += text
            prefixes.append((rendered, breakpoint))
        total = tokens(rendered)
        marked = [index for index, (_, breakpoint) in enumerate(prefixes) if breakpoint]
        if not marked:
            return total, 0, 0
        last = marked[-1]
        read = max(
            (tokens(prefix) for prefix, _ in prefixes[: last + 1] if prefix in self.written),
            default=0,
        )
        up_to_last = tokens(prefixes[last][0])
        written = up_to_last - read if up_to_last > read and up_to_last >= self.minimum else 0
        if answered:
            for index in marked:
                if tokens(prefixes[index][0]) >= self.minimum:
                    self.written.add(prefixes[index][0])
        return total - read - written, read, written


class Recording:
    """One HAR file being written, and the truth of its sessions as built."""

    def __init__(self, name, start, about):
        self.name = name
        self.start = datetime.fromisoformat(start).replace(tzinfo=timezone.utc)
        self.about = about
        self.entries = []
        self.kinds = []
        self.sessions = {}

    def session(self, label, parent=None):
        self.sessions[label] = {"label": label, "entries": [], "parent": parent, "retries": 0}

    def add(self, session, kind, at, url, headers, body, status, response, **options):
        assert kind in KINDS, kind
        index = len(self.entries)
        self.sessions[session]["entries"].append(index)
        if kind == "retry":
            self.sessions[session]["retries"] += 1
        self.kinds.append(kind)
        started = self.start + timedelta(seconds=at)
        wait = options.get("wait", 1800)
        status_text = {200: "OK", 500: "Internal Server Error", 529: ""}[status]
        mime = options.get("mime", "application/json")
        response_headers = [{"name": "content-type", "value": mime}] + options.get(
            "response_headers", []
        )
        self.entries.append(
            {
                "startedDateTime": started.strftime("%Y-%m-%dT%H:%M:%S.")
                + f"{started.microsecond // 1000:03d}Z",
                "time": wait,
                "request": {
                    "method": "POST",
                    "url": url,
                    "httpVersion": "HTTP/1.1",
                    "headers": [{"name": name, "value": value} for name, value in headers],
                    "queryString": [],
                    "cookies": [],
                    "headersSize": -1,
                    "bodySize": len(body.encode()),
                    "postData": {"mimeType": "application/json", "text": body},
                },
                "response": {
                    "status": status,
                    "statusText": status_text,
                    "httpVersion": "HTTP/1.1",
                    "headers": response_headers,
                    "cookies": [],
                    "content": {
                        "size": len(response.encode()),
                        "mimeType": mime,
                        "text": response,
                    },
                    "redirectURL": "",
                    "headersSize": -1,
                    "bodySize": len(response.encode()),
                },
                "cache": {},
                "timings": {"send": 0, "wait": wait, "receive": 0},
            }
        )

    def har(self):
        return {
            "log": {
                "version": "1.2",
                "creator": {"name": "kvlint scripts/make-agent-fixtures.py", "version": "1"},
                "entries": self.entries,
            }
        }

    def expected(self):
        labels = list(self.sessions)
        return {
            "about": self.about,
            "entries": len(self.entries),
            "sessions": [
                {
                    "label": session["label"],
                    "entries": session["entries"],
                    "parent": None if session["parent"] is None else labels.index(session["parent"]),
                    "retries": session["retries"],
                }
                for session in self.sessions.values()
            ],
            "kinds": self.kinds,
        }

