#!/usr/bin/env python3
"""The modules of src/ and include/accelerate/ form layers, and every
#include points to the same layer or one below (docs/design.md, "Layers").
Prints each include that points up, and the module graph's cycles if any;
exits 1 when there is one.

usage: module_layers_test.py <source root>
"""
import os
import re
import sys

# Lowest first. error.hpp/config.hpp and src/detail/ are the base every
# module may use; accelerate.hpp, the umbrella header, sits on top.
LAYERS = [
    {"base", "detail"},
    {"runtime"},
    {"comm"},
    {"random"},
    {"data"},
    {"amp"},
    {"checkpoint"},
    {"training_state"},
    {"tracking", "profiling", "modeling"},
    {"training"},
    {"interop"},
    {"cli"},
    {"umbrella"},
]
RANK = {module: rank for rank, modules in enumerate(LAYERS) for module in modules}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def module_of_file(relative):
    parts = relative.split("/")
    if parts[0] == "include":  # include/accelerate/<module>/x.hpp or include/accelerate/x.hpp
        if len(parts) == 3:
            return "umbrella" if parts[2] == "accelerate.hpp" else "base"
        return parts[2]
    if len(parts) == 2:  # src/error.cpp
        return "base"
    return parts[1]


def module_of_include(path):
    parts = path.split("/")
    if parts[0] == "accelerate":
        if len(parts) == 2:
            return "umbrella" if parts[1] == "accelerate.hpp" else "base"
        return parts[1]
    return parts[0] if len(parts) > 1 else None  # a sibling file: same module


def main():
    root = sys.argv[1]
    upward = []
    edges = {}
    for top in ("src", os.path.join("include", "accelerate")):
        for directory, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".hpp", ".cpp", ".h", ".cu", ".in")):
                    continue
                path = os.path.join(directory, name)
                relative = os.path.relpath(path, root)
                source = module_of_file(relative)
                if source not in RANK:
                    upward.append(f"{relative}: module '{source}' is in no layer of module_layers_test.py")
                    continue
                with open(path, encoding="utf-8", errors="replace") as text:
                    for number, line in enumerate(text, 1):
                        match = INCLUDE.match(line)
                        if not match:
                            continue
                        target = module_of_include(match.group(1)) or source
                        if target not in RANK or target == source:
                            continue
                        edges.setdefault(source, set()).add(target)
                        if RANK[target] > RANK[source]:
                            upward.append(f"{relative}:{number}: {source} includes {match.group(1)} ({target} is above)")
    for problem in upward:
        print(problem)
    print("module graph:")
    for source in sorted(edges, key=lambda m: RANK[m]):
        print(f"  {source} -> {', '.join(sorted(edges[source], key=lambda m: RANK[m]))}")
    if upward:
        print(f"FAIL: {len(upward)} include(s) point up")
        return 1
    print("PASS: every include points to its own layer or one below")
    return 0


if __name__ == "__main__":
    sys.exit(main())
