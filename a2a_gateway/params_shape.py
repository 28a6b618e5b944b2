"""Where the A2A params must hold JSON objects, checked before the SDK parses them.

protobuf's JSON parser iterates whatever it is given for a message field, so a string there
(`"configuration": "x"`) reads as an empty message and the request goes ahead as if the field
were absent. A client that sent it meant something else: SPEC §8.2 makes it invalid params.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

# protobuf's own JSON forms (Struct, Value, Timestamp, ...) are checked by its parser.
_WELL_KNOWN = "google.protobuf."


def _field(descriptor: Descriptor, key: str) -> FieldDescriptor | None:
    field = descriptor.fields_by_name.get(key)
    if field is not None:
        return field
    return next((item for item in descriptor.fields if item.json_name == key), None)


def misplaced_value(value: Any, descriptor: Descriptor, path: str = "params") -> str | None:
    """The path of the first value that should be a JSON object and is not, else None."""
    if not isinstance(value, dict):
        return path
    for key, item in value.items():
        field = _field(descriptor, key)
        message = field.message_type if field is not None else None
        if (
            field is None
            or message is None
            or field.type != FieldDescriptor.TYPE_MESSAGE
            or message.full_name.startswith(_WELL_KNOWN)
            or message.GetOptions().map_entry
            or item is None
        ):
            continue
        items = item if field.is_repeated else [item]
        if not isinstance(items, list):
            return f"{path}.{key}"
        for index, element in enumerate(items):
            where = f"{path}.{key}[{index}]" if items is item else f"{path}.{key}"
            found = misplaced_value(element, message, where)
            if found is not None:
                return found
    return None
