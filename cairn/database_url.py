"""Database URLs as libpq reads them, in the shape dj-database-url parses. libpq lets a URL list
hosts so that a client follows a failover by itself, keeping the first that takes writes:
`postgres://u@h1:5432,h2:5432/db?target_session_attrs=read-write`. dj-database-url reads one
host, so the list moves to the query string (`?host=h1,h2&port=5432,5432`), which libpq also reads."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlencode

_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]*://"
_URL = re.compile(rf"(?P<head>{_SCHEME}(?:[^@/?#]*@)?)(?P<hosts>[^/?#]*)(?P<tail>.*)", re.S)
_HOST = re.compile(r"(?:\[(?P<ipv6>[0-9A-Fa-f:.]+)\]|(?P<name>[^\[\]:,]+))(?::(?P<port>\d*))?")
# Where one URL of a list ends: a comma or whitespace before the next URL's scheme. A comma
# inside a URL (its hosts, its query string) is followed by no scheme.
_NEXT_URL = re.compile(rf"[\s,]+(?={_SCHEME})")


def hosts_in_query(url: str) -> str:
    """`url` with its hosts and ports moved to its query string when it lists several, else `url`
    unchanged. A host missing its port keeps libpq's default. ValueError names an entry of the
    list that is not `host[:port]`."""
    found = _URL.fullmatch(url)
    if found is None or "," not in found["hosts"]:
        return url
    hosts, ports = [], []
    for entry in found["hosts"].split(","):
        host = _HOST.fullmatch(entry)
        port = host["port"] if host else None
        if host is None or (port and not 1 <= int(port) <= 65535):
            raise ValueError(f"{entry!r} in its list of hosts is not host[:port]")
        hosts.append(unquote(host["ipv6"] or host["name"]))
        ports.append(port or "")
    before_fragment, hash_sign, fragment = found["tail"].partition("#")
    path, _, query = before_fragment.partition("?")
    listed = {"host": ",".join(hosts)} | ({"port": ",".join(ports)} if any(ports) else {})
    query = "&".join(filter(None, [query, urlencode(listed)]))
    return f"{found['head']}{path}?{query}{hash_sign}{fragment}"


def database_urls(raw: str) -> list[str]:
    """The URLs of a list separated by commas or whitespace, where a URL may hold commas itself."""
    return [url.rstrip(",") for url in _NEXT_URL.split(raw.strip()) if url.strip(", \t\n")]
