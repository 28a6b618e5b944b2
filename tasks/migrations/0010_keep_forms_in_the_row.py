"""On PostgreSQL, keep a task's stored forms in its row, uncompressed, whenever the row fits a page.

Every read door serves one stored form, so a form moved to the TOAST table costs each read a TOAST
index lookup, its chunks and their decompression, a cost that grows with the TOAST index and is
paid for every task of a ListTasks page. With the forms stored `MAIN` and the table's
`toast_tuple_target` at its largest, a row under a page is left as it is; a larger one has its
evaluation and other JSON compressed and moved out first, the forms last. Writes cost the same
either way. Rows already stored keep their layout until they are written again.
"""

from django.db import migrations

FORMS = ("view_json", "a2a_json", "a2a_list_json")
# The largest target PostgreSQL takes: a row is left whole while it fits an 8 KB page.
TUPLE_TARGET = 8160


def _set_storage(apps, schema_editor, *, in_row: bool) -> None:
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    quote = connection.ops.quote_name
    model = apps.get_model("tasks", "Task")
    storage = "MAIN" if in_row else "EXTENDED"
    target = (
        f"SET (toast_tuple_target = {TUPLE_TARGET})" if in_row else "RESET (toast_tuple_target)"
    )
    alters = ", ".join(
        [target]
        + [
            f"ALTER COLUMN {quote(model._meta.get_field(name).column)} SET STORAGE {storage}"
            for name in FORMS
        ]
    )
    schema_editor.execute(f"ALTER TABLE {quote(model._meta.db_table)} {alters}")


def forms_in_row(apps, schema_editor):
    _set_storage(apps, schema_editor, in_row=True)


def forms_toasted(apps, schema_editor):
    _set_storage(apps, schema_editor, in_row=False)


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0009_compress_forms_with_lz4"),
    ]

    operations = [
        migrations.RunPython(forms_in_row, forms_toasted),
    ]
