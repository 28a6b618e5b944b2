"""The keeper's admin, branded as Cairn (SPEC §13). The models register themselves in each app's
admin.py; this only names the site and gives the change lists the page's full width."""

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig


class CairnAdminSite(admin.AdminSite):
    site_header = "Cairn keeper"
    site_title = "Cairn keeper"
    index_title = "The keeper's desk"
    # The index lists every model; a sidebar on each page would take a quarter of a 1280 px screen
    # from the change lists.
    enable_nav_sidebar = False


class CairnAdminConfig(AdminConfig):
    default_site = "keeper.site.CairnAdminSite"
