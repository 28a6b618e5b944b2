from django.apps import AppConfig


class A2AGatewayConfig(AppConfig):
    name = "a2a_gateway"
    verbose_name = "A2A gateway"
