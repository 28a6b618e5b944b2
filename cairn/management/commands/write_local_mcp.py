"""`manage.py write_local_mcp`: write the server's schemas into `local_mcp/cairn_mcp.py`, so the file
in the repository runs as the site serves it."""

from django.core.management.base import BaseCommand

from mcp_door.local_file import LOCAL_SERVER, repository_source


class Command(BaseCommand):
    help = "Write the server's schemas into local_mcp/cairn_mcp.py."

    def handle(self, *args, **options):
        LOCAL_SERVER.write_text(repository_source(), encoding="utf-8")
        self.stdout.write(f"wrote {LOCAL_SERVER}")
