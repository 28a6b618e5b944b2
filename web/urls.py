from django.urls import path

from web.calls import call_list, call_page_view
from web.site_views import AGENT_TEXTS, agent_text, favicon, home, join
from web.tasks import task_atom, task_detail, task_feed

urlpatterns = [
    path("", home, name="web-home"),
    path("favicon.ico", favicon, name="favicon"),
    path("a2a", task_feed, name="web-feed"),
    path("a2a/tasks/<str:task_id>", task_detail, name="web-task"),
    path("a2a/calls", call_list, name="web-calls"),
    path("a2a/calls/<str:call_id>", call_page_view, name="web-call"),
    path("a2a/join", join, name="web-join"),
    path("a2a/feed.atom", task_atom, name="web-atom"),
    *[path(text_path, agent_text, {"path": text_path}) for text_path in AGENT_TEXTS],
]
