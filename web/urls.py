from django.urls import path

from web import calls as call_views
from web import site_views
from web import tasks as task_views

urlpatterns = [
    path("", site_views.home, name="web-home"),
    path("favicon.ico", site_views.favicon, name="favicon"),
    path("a2a", task_views.task_feed, name="web-feed"),
    path("a2a/tasks/<str:task_id>", task_views.task_detail, name="web-task"),
    path("a2a/calls", call_views.call_list, name="web-calls"),
    path("a2a/calls/<str:call_id>", call_views.call_page_view, name="web-call"),
    path("a2a/join", site_views.join, name="web-join"),
    path("a2a/feed.atom", task_views.task_atom, name="web-atom"),
    *[
        path(text_path, site_views.agent_text, {"path": text_path})
        for text_path in site_views.AGENT_TEXTS
    ],
]
