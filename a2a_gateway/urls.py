"""The A2A door: the Agent Card, the JSON-RPC endpoint and the HTTP+JSON binding (SPEC §1, §8)."""

from django.urls import path

from a2a_gateway import views

urlpatterns = [
    path(".well-known/agent-card.json", views.agent_card, name="a2a-agent-card"),
    path("api/a2a", views.a2a_endpoint, name="a2a-endpoint"),
    # Some clients (the A2A 1.0 TCK among them) append a slash to the card's URL.
    path("api/a2a/", views.a2a_endpoint),
    path("api/a2a/<path:operation>", views.a2a_endpoint, name="a2a-rest"),
]
