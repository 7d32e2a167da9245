"""One table row per `summary | driver | what | value | target |` line that a
benchmark driver printed, over several runs of it (one file per run): each
number in the value is the median of that number across the runs, the rest of
the value as the first run printed it. A row some run lacks is marked with how
many runs had it. Exit 1 when no file holds a summary line."""

import re
import statistics
import sys

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def rows(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("summary | "):
                cells = [c.strip() for c in line.rstrip("\n").split("|")[1:-1]]
                if len(cells) == 4:
                    yield cells


def median_text(values):
    first = values[0]
    columns = [NUMBER.findall(v) for v in values]
    if any(len(c) != len(columns[0]) for c in columns):
        return first + " (runs differ in shape)"
    places = [len(n.split(".")[1]) if "." in n else 0 for n in columns[0]]
    medians = iter(
        f"{statistics.median(float(c[i]) for c in columns):.{places[i]}f}"
        for i in range(len(places))
    )
    return NUMBER.sub(lambda _: next(medians), first)


def main(paths):
    order, seen = [], {}
    for path in paths:
        for driver, what, value, target in rows(path):
            key = (driver, what)
            if key not in seen:
                order.append(key)
                seen[key] = (target, [])
            seen[key][1].append(value)
    if not order:
        return 1
    for driver, what in order:
        target, values = seen[(driver, what)]
        value = median_text(values)
        if len(values) != len(paths):
            value += f" ({len(values)} of {len(paths)} runs)"
        print(f"| {driver} | {what} | {value} | {target} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
