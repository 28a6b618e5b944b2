from django.apps import AppConfig


class CairnConfig(AppConfig):
    """The project's own start-up hooks; it holds no models."""

    name = "cairn"
    verbose_name = "Cairn"

    def ready(self) -> None:
        from cairn.connections import release_connections_at_fork

        release_connections_at_fork()
