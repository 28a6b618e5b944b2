from django.apps import AppConfig


class A2AGatewayConfig(AppConfig):
    name = "a2a_gateway"
    verbose_name = "A2A gateway"

    def ready(self) -> None:
        from a2a_gateway import checks  # noqa: F401  (registers the gRPC address check)
