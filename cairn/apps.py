import os

from django.apps import AppConfig


class CairnConfig(AppConfig):
    """The project's own start-up hooks; it holds no models."""

    name = "cairn"

    def ready(self) -> None:
        from cairn.connections import release_connections

        os.register_at_fork(before=release_connections)
