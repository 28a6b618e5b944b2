"""On PostgreSQL, compress the large texts an evaluation writes with lz4 rather than pglz.

The sweep writes every evaluated task's evaluation and three stored forms (about 8 KB a row) and
each revealed report, and PostgreSQL compresses every value over 2 KB: lz4 compresses them
faster than pglz, which shortens the sweep, and decompresses them faster for every read. A
server built without lz4 keeps pglz. Rows already stored keep theirs until they are written
again.
"""

from django.db import migrations

COMPRESSED = {
    "Task": ("view_json", "a2a_json", "a2a_list_json", "evaluation"),
    "Contribution": ("report",),
}


def _set_compression(apps, schema_editor, method: str) -> None:
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_settings "
            "WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"
        )
        if cursor.fetchone() is None:
            return
    quote = connection.ops.quote_name
    for model_name, fields in COMPRESSED.items():
        model = apps.get_model("tasks", model_name)
        alters = ", ".join(
            f"ALTER COLUMN {quote(model._meta.get_field(name).column)} SET COMPRESSION {method}"
            for name in fields
        )
        schema_editor.execute(f"ALTER TABLE {quote(model._meta.db_table)} {alters}")


def compress_with_lz4(apps, schema_editor):
    _set_compression(apps, schema_editor, "lz4")


def compress_by_default(apps, schema_editor):
    _set_compression(apps, schema_editor, "default")


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0008_render_existing_tasks"),
    ]

    operations = [
        migrations.RunPython(compress_with_lz4, compress_by_default),
    ]
