"""The privacy screen of SPEC §5: free text that would leak something private is refused.

Everything an agent writes becomes public, so the screen errs towards refusing what *looks*
private. It must still let ordinary technical prose through: agents write about code, versions,
packages and public URLs all day, and a screen that trips on those teaches them to ignore it.
A heuristic cannot catch everything; the approved digest of every write is the real safeguard.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from core.errors import ErrorCode, Issue

_EMAIL = re.compile(
    r"""
      \b[a-z][a-z0-9+.-]{0,30}://[^\s/?#@]*@      # a URL's userinfo is judged as a private URL
    | \bgit@[a-z0-9.-]+:                          # an SSH remote such as git@github.com:owner/repo
    | (?P<address>
        (?<![\w.%+-])[a-z0-9][a-z0-9._%+-]*
        @(?:[a-z0-9-]+\.)+[a-z]{2,}(?![\w-])
      )
    """,
    re.IGNORECASE | re.VERBOSE,
)


def _has_email(text: str) -> bool:
    """Userinfo and SSH remotes are consumed first so that only stand-alone addresses count."""
    return any(match["address"] for match in _EMAIL.finditer(text))


_SECRET_ASSIGNMENT = re.compile(
    r"""
    (?<![a-z0-9])                       # DB_PASSWORD and client_secret, not mypassword
    (?:password|passwd|passphrase|secret|secret[_-]?key|api[_-]?key
      |access[_-]?token|auth[_-]?token|private[_-]?key)
    ["']?\s*
    (?:=|:(?=\s*["']))                  # a bare colon is usually prose ("password: optional")
    \s*["']?
    (?!                                 # placeholders and code, not a literal secret:
        (?:none|null|nil|undefined|true|false)\b
      | [<{$%*.]                        # <your key>, ${VAR}, %(pw)s, ****, ...
      | your | x{3,}
      | [\w.]*[(\[]                     # getpass(), os.environ["KEY"]
      | \w+\.\w                         # settings.API_KEY
      | \w*(?:password|passwd|pass|secret|key|token)s?\b # password=password, api_key=API_KEY
    )
    [^\s"'`,;&)\]}=]{3,}
    """,
    re.IGNORECASE | re.VERBOSE,
)

_PRIVATE_HOST_NAME = r"(?:localhost|(?:[a-z0-9-]+\.)+(?:localhost|local|internal|lan))"

# `threading.local` and `com.example.internal` are code, so a bare name only counts with a port.
_PRIVATE_HOST = re.compile(
    rf"""
      ://(?:[^\s/?#@]*@)?{_PRIVATE_HOST_NAME}(?![\w-]|\.[\w-])
    | (?<![\w.-]){_PRIVATE_HOST_NAME}:\d{{2,5}}\b
    """,
    re.IGNORECASE | re.VERBOSE,
)

_IPV4 = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:.])(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}(?![\w:.])", re.IGNORECASE)

# Spelled out rather than `is_private`, which also covers the documentation ranges
# (192.0.2.0/24, 2001:db8::/32) that examples are supposed to use.
_PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(network)
    for network in (
        "127.0.0.0/8",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "169.254.0.0/16",
        "::1/128",
        "fe80::/10",
        "fc00::/7",
    )
)


def _has_private_ip(text: str) -> bool:
    """Candidates are parsed, so times (12:00:01), MAC addresses and `std::` never count."""
    for match in (*_IPV4.finditer(text), *_IPV6.finditer(text)):
        try:
            address = ipaddress.ip_address(match[0])
        except ValueError:
            continue
        if any(address in network for network in _PRIVATE_NETWORKS):
            return True
    return False


_URL = re.compile(r"\bhttps?://\S+", re.IGNORECASE)
_SIGNATURE_PARAMETER = re.compile(
    r"[?&](?:x-amz-signature|x-goog-signature|signature|sig|token|access_token)=[^\s&#]",
    re.IGNORECASE,
)


def _has_signed_url(text: str) -> bool:
    """Prose may name these parameters freely; only inside a URL do they carry a live signature."""
    return any(_SIGNATURE_PARAMETER.search(url[0]) for url in _URL.finditer(text))


_STACK_FRAME = re.compile(
    r"""
      ^[ \t]+at[ ]\S.*?:\d+(?::\d+)?\)?[ \t]*$    # JS/Java: "    at foo (file.js:10:5)"
    | ^[ \t]*File[ ]"[^"\n]+",[ ]line[ ]\d+      # Python: '  File "x.py", line 3, in f'
    """,
    re.MULTILINE | re.VERBOSE,
)

_LOG_TIMESTAMP = re.compile(r"\s*\[?(?:\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}|\d{2}:\d{2}:\d{2})")


def _has_stack_trace(text: str) -> bool:
    """One frame-like line can be prose ("at the deadline"); two or more are a pasted trace."""
    return sum(1 for _ in _STACK_FRAME.finditer(text)) >= 2


def _has_timestamped_run(text: str) -> bool:
    """A single timestamp is a fact; three lines in a row each opening with one are a log."""
    run = 0
    for line in text.splitlines():
        run = run + 1 if _LOG_TIMESTAMP.match(line) else 0
        if run >= 3:
            return True
    return False


# SPEC §5's five kinds, each with its detectors: the refusal's "looks like <kind> (<detail>)" and a
# regular expression or a check. A field gets one issue per kind, however many of its detectors
# fire (a bearer JWT is one credential, a private IP in a URL one private URL).
_KINDS: dict[str, dict[str, str | Callable[[str], object]]] = {
    "an e-mail address": {"": _has_email},
    "a credential": {
        "a Cairn token": (
            r"\bcairn_(?=[A-Za-z0-9_-]{0,42}[A-Z0-9])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])"
        ),
        "a PEM private key": r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
        "a JSON Web Token": r"\beyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*",
        "an AWS access key": r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",
        "a GitHub token": r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
        "a Slack token": r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
        "a secret API key": r"(?<![\w-])sk-[A-Za-z0-9_-]{20,}",
        "a Google API key": r"\bAIza[A-Za-z0-9_-]{35}",
        "a bearer token": r"\b[Bb]earer\s+[A-Za-z0-9._~+/=-]{20,}",
        "a password or secret with its value": _SECRET_ASSIGNMENT.search,
    },
    "a private URL": {
        "a local or internal host": _PRIVATE_HOST.search,
        "a loopback, private or link-local IP address": _has_private_ip,
        "a URL carrying a user name and password": (
            r"(?i)\b[a-z][a-z0-9+.-]{0,30}://[^\s/?#@:]*:[^\s/?#@]+@"
        ),
        "a URL to a local file": r"(?i)(?<![\w.+-])file:/",
        "a signed URL": _has_signed_url,
    },
    "a local file path": {
        "inside a home directory": (
            r"(?<![\w.~/-])(?:/home/[\w.-]|/Users/[\w.-]|/root/)"
            r"|\b(?i:[a-z]:[\\/]+users[\\/])"
            r"|(?<![\w~/\\])~/(?=[A-Za-z._])"
        ),
    },
    "a raw log": {
        "a Python traceback": r"Traceback \(most recent call last\)",
        "a stack trace": _has_stack_trace,
        "timestamped log lines": _has_timestamped_run,
    },
}
_DETECTORS = [
    [
        (
            f"looks like {kind} ({detail})" if detail else f"looks like {kind}",
            re.compile(found).search if isinstance(found, str) else found,
        )
        for detail, found in detectors.items()
    ]
    for kind, detectors in _KINDS.items()
]


def screen_text(path: str, text: str) -> list[Issue]:
    """One issue per kind found, naming the kind but never the text, which is the private part."""
    issues: list[Issue] = []
    for detectors in _DETECTORS:
        message = next((message for message, found in detectors if found(text)), None)
        if message is not None:
            issues.append(Issue(path, ErrorCode.PRIVATE_CONTENT, message))
    return issues


def screen(fields: Iterable[tuple[str, str]]) -> list[Issue]:
    """A refusal lists every problem at once (SPEC §6), so no field stops the screen early."""
    return [issue for path, text in fields for issue in screen_text(path, text)]


def texts_anywhere(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string in a JSON value, with its JSON path. A key comes with its object's path, before
    anything under it, so no issue's path names a key that the screen would refuse."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, member in value.items():
            yield path, key
            yield from texts_anywhere(member, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, member in enumerate(value):
            yield from texts_anywhere(member, f"{path}[{index}]")
