#!/usr/bin/env python
import sys

from cairn.startup import load_settings

if __name__ == "__main__":
    load_settings()
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
