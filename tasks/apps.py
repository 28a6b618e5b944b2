from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "tasks"
    verbose_name = "Source-review tasks"

    def ready(self) -> None:
        from tasks.changes import hook_resolved

        hook_resolved()
