"""Typed reads of the environment. A bad value stops start-up naming the variable."""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, x25519
from django.core.exceptions import ImproperlyConfigured

from core.site import is_loopback
from ledger.keyper_seal import b64u_decode
from ledger.signed_note import COSIGNATURE_V1, NoteError, VerifierKey, verifier_key_parse

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str) -> bool:
    raw = os.environ.get(name, "")
    if raw.strip().lower() not in _TRUE | _FALSE:
        raise ImproperlyConfigured(f"{name} must be true or false, not {raw!r}")
    return raw.strip().lower() in _TRUE


def env_choice(name: str, choices: tuple[str, ...], default: str) -> str:
    """One of `choices`, in lower case; a choice of "" allows the variable unset."""
    value = env_str(name, default).lower()
    if value not in choices:
        named = ", ".join(choice or "unset" for choice in choices)
        raise ImproperlyConfigured(f"{name} must be one of {named}, not {value!r}")
    return value


def env_int(name: str, default: int, *, minimum: int = 0, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {raw!r}") from None
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f"at least {minimum}" if maximum is None else f"between {minimum} and {maximum}"
        raise ImproperlyConfigured(f"{name} must be {bounds}, not {value}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_url(name: str) -> str:
    """An absolute http(s) origin without a trailing slash, or "" when unset."""
    raw = env_str(name)
    if not raw:
        return ""
    parts = urlsplit(raw)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ImproperlyConfigured(
            f"{name} must be an http(s) URL such as https://cairn.example, not {raw!r}"
        )
    if parts.query or parts.fragment or parts.path not in {"", "/"}:
        raise ImproperlyConfigured(
            f"{name} must be a site origin without path, query or fragment, not {raw!r}"
        )
    return f"{parts.scheme}://{parts.netloc}"


def env_listen_address(name: str, default: str) -> str:
    """`host:port` to listen on (an IPv6 host in brackets, `[::1]:50051`), or "" when set empty,
    which turns off what listens there."""
    raw = env_str(name, default)
    if not raw:
        return ""
    host, _, port = raw.rpartition(":")
    ipv6 = len(host) > 2 and host.startswith("[") and host.endswith("]")
    plain = bool(host) and not any(char in host for char in "[]:")
    if not (ipv6 or plain) or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ImproperlyConfigured(
            f"{name} must be host:port such as 127.0.0.1:50051 (or empty to turn it off), not {raw!r}"
        )
    return raw


def env_advertised_address(name: str, *, listening: str, site_url: str, off: str) -> str:
    """The address the Agent Card gives clients of a server listening on `listening` ("" when
    nothing does), SPEC §8.1: the variable, else `listening` (behind a proxy they differ)."""
    if not listening:
        return ""
    address = env_str(name)
    if any(char.isspace() for char in address):
        raise ImproperlyConfigured(f"{name} must be an address without spaces, not {address!r}")
    if not address and listening.rpartition(":")[0] in {"", "0.0.0.0", "[::]"}:
        raise ImproperlyConfigured(
            f"{name} must be set when the server listens on every address ({listening}): "
            "the Agent Card must name one that clients reach"
        )
    address = address or listening
    if site_url and is_loopback(address) and not is_loopback(site_url):
        raise ImproperlyConfigured(
            f"{name} must be set to an address clients of {site_url} reach: the Agent Card "
            f"would list {address}, which only this machine reaches ({off})"
        )
    return address


def _key_text(name: str) -> str:
    """The key the variable holds (PEM, or 64 hex characters), or the contents of the file it names."""
    raw = env_str(name)
    if not raw or raw.startswith("-----BEGIN") or re.fullmatch(r"[0-9a-fA-F]{64}", raw):
        return raw
    try:
        return Path(raw).expanduser().read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ImproperlyConfigured(
            f"{name} is neither a key nor the path of a readable file: {exc.strerror}"
        ) from None


def created_once(path: Path, make: Callable[[], str]) -> str:
    """A development key: created on first start (mode 0600) and reused after."""
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(make())
    return path.read_text(encoding="utf-8").strip()


def _key_or_created(
    name: str, *, create_at: Path | None, form: str, make: Callable[[], str]
) -> str:
    """The key's text as set (the value, or its file's). Unset, it is made once at `create_at`
    (development), or start-up stops when that is None: a production site never invents a key."""
    text = _key_text(name)
    if text:
        return text
    if create_at is None:
        raise ImproperlyConfigured(f"{name} must be set ({form}, or its file's path)")
    return created_once(create_at, make)


_PRIVATE_KEYS = {"Ed25519": ed25519.Ed25519PrivateKey, "X25519": x25519.X25519PrivateKey}


def private_pem(key: ed25519.Ed25519PrivateKey | x25519.X25519PrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _pem_checked(name: str, text: str, algorithm: str) -> str:
    try:
        key = serialization.load_pem_private_key(text.encode(), password=None)
    except (ValueError, TypeError):
        raise ImproperlyConfigured(
            f"{name} must be an {algorithm} private key as unencrypted PKCS#8 PEM, or its file's path"
        ) from None
    if not isinstance(key, _PRIVATE_KEYS[algorithm]):
        raise ImproperlyConfigured(f"{name} must be an {algorithm} key, not {type(key).__name__}")
    return text


def env_signing_key(name: str, *, create_at: Path | None) -> str:
    """An Ed25519 private key as PKCS#8 PEM (the value, or the path of a file holding it)."""
    text = _key_or_created(
        name,
        create_at=create_at,
        form="an Ed25519 private key as PKCS#8 PEM",
        make=lambda: private_pem(ed25519.Ed25519PrivateKey.generate()),
    )
    return _pem_checked(name, text, "Ed25519")


def env_optional_key(name: str, algorithm: str) -> str:
    """Like `env_signing_key`, of `algorithm` (Ed25519 or X25519); unset, its feature is off: ""."""
    text = _key_text(name)
    return _pem_checked(name, text, algorithm) if text else ""


def _entries(name: str) -> list[str]:
    raw = env_str(name).replace(";", "\n")
    return [line.strip() for line in raw.splitlines() if line.strip()]


def _verifier_key(name: str, text: str, *, type: int) -> VerifierKey:
    try:
        return verifier_key_parse(text, type=type)
    except NoteError as error:
        raise ImproperlyConfigured(f"{name}: {error}") from None


def env_verifier_keys(name: str, *, type: int) -> list[str]:
    """C2SP signed-note verifier keys of one signature type, one per line (or `;`)."""
    return [_verifier_key(name, entry, type=type).text for entry in _entries(name)]


def _fields(name: str, what: str, form: str) -> Iterator[list[str]]:
    """Each entry of the setting split into the fields `form` names (each `<...>`), all of them."""
    for entry in _entries(name):
        parts = entry.split()
        if len(parts) != form.count("<"):
            raise ImproperlyConfigured(f"{name}: each {what} is `{form}`")
        yield parts


def _url_checked(name: str, of: str, url: str) -> str:
    url = url.rstrip("/")
    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
        raise ImproperlyConfigured(f"{name}: the URL of {of} must be http(s)://host/...")
    return url


def env_witnesses(name: str) -> list[dict[str, str]]:
    """`<cosignature/v1 verifier key> <URL>` per line (or `;`): `[{"name", "key", "url"}]`."""
    witnesses = []
    for text, url in _fields(name, "witness", "<verifier key> <URL>"):
        key = _verifier_key(name, text, type=COSIGNATURE_V1)
        witnesses.append(
            {"name": key.name, "key": key.text, "url": _url_checked(name, key.name, url)}
        )
    if len({w["key"] for w in witnesses}) != len(witnesses):
        raise ImproperlyConfigured(f"{name} names a witness twice")
    return witnesses


def env_keypers(name: str) -> list[dict[str, str]]:
    """`<name> <hpke_key> <URL>` per line (or `;`): `[{"name", "hpke_key", "url"}]`, in order."""
    keypers = []
    for keyper, hpke_key, url in _fields(name, "keyper", "<name> <hpke_key> <URL>"):
        try:
            x25519.X25519PublicKey.from_public_bytes(b64u_decode(hpke_key))
        except ValueError:
            raise ImproperlyConfigured(
                f"{name}: the hpke_key of {keyper} is not a raw X25519 public key in base64url"
            ) from None
        keypers.append(
            {"name": keyper, "hpke_key": hpke_key, "url": _url_checked(name, keyper, url)}
        )
    if len({k["name"] for k in keypers}) != len(keypers):
        raise ImproperlyConfigured(f"{name} names a keyper twice")
    return keypers


def env_seal_key(name: str, *, create_at: Path | None) -> bytes:
    """A 32-byte AES-256 key as 64 hex characters (the value, or the path of a file holding them)."""
    form = "32 bytes as 64 hex characters"
    text = _key_or_created(name, create_at=create_at, form=form, make=lambda: secrets.token_hex(32))
    if not re.fullmatch(r"[0-9a-fA-F]{64}", text):
        raise ImproperlyConfigured(f"{name} must be {form}, or the path of a file holding them")
    return bytes.fromhex(text)
