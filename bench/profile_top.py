"""Summarise a py-spy collapsed-stack file (`py-spy record --format raw`): inclusive share per frame.

.venv/bin/python bench/profile_top.py profile.txt [--match a2a_gateway,tasks,cairn] [--top 40]
"""

from __future__ import annotations

import argparse
import collections
import re


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument(
        "--match", default="", help="comma list: only frames whose text contains one of these"
    )
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in open(args.file):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not count.isdigit():
            continue
        samples = int(count)
        total += samples
        seen = set()
        for frame in stack.split(";"):
            frame = re.sub(r"\s*\(.*?/site-packages/", " (", frame)
            frame = re.sub(r"\s*\(/work/main/|\s*\(/tmp/cairn_patched/", " (", frame)
            if frame not in seen:
                seen.add(frame)
                inclusive[frame] += samples
    patterns = [p for p in args.match.split(",") if p]
    print(f"{total} samples")
    for frame, samples in inclusive.most_common():
        if patterns and not any(p in frame for p in patterns):
            continue
        print(f"{100 * samples / total:5.1f}%  {frame}")
        args.top -= 1
        if args.top <= 0:
            break


if __name__ == "__main__":
    main()
