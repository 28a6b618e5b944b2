"""The keypers a site's contributors seal to (SPEC §15.8), as `CAIRN_KEYPERS` lists them."""

from __future__ import annotations

from django.conf import settings

from ledger.keyper_seal import Keyper


def keypers_configured() -> list[Keyper]:
    """In `CAIRN_KEYPERS`' order: share i goes to the i-th."""
    return [Keyper(**keyper) for keyper in settings.CAIRN_KEYPERS]
