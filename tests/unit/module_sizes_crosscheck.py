#!/usr/bin/env python3
"""Cross-check of the big-model utilities against Hugging Face Accelerate.

Builds in torch.nn the trees that tests/unit/module_trees.hpp builds in C++,
runs Accelerate's own functions on them, and compares every result with the
JSON that module_sizes_dump printed for the C++ trees. Exits 0 when all
agree, 1 on the first list of differences.

With two folders more, it also reads the offload folder module_sizes_dump
wrote (ours) with Accelerate's load_offloaded_weight, and writes the same
tensors with Accelerate's offload_state_dict into the second (theirs), for
module_sizes_dump to read.

With --empty, both sides build the trees without memory (ours with
init_empty_weights, Accelerate's under its init_empty_weights with
include_buffers=True) and every result is compared again, with the names of
the tensors left on the meta device. Accelerate's init_empty_weights replaces
a parameter when a second module registers it, which unties it (and its
retie_parameters ties only to a parameter off the meta device), so the Python
trees are tied again by hand as the trees built whole are tied. Ours keeps the
tie: the tensor is made on the meta device, not replaced.

usage: module_sizes_crosscheck.py [--empty] <json from module_sizes_dump> [<our offload folder> <their offload folder>]
"""
import json
import logging
import sys

import torch
from torch import nn
import warnings

from accelerate import init_empty_weights
from accelerate.utils import (
    calculate_maximum_sizes,
    compute_module_sizes,
    find_tied_parameters,
    get_balanced_memory,
    get_max_layer_size,
    infer_auto_device_map,
    load_offloaded_weight,
    offload_state_dict,
)


class Block(nn.Module):
    def __init__(self, width=6):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)
        self.register_buffer("scale", torch.ones(width))
        self.register_buffer("positions", torch.arange(8))


class Head(nn.Module):
    def __init__(self, tied):
        super().__init__()
        self.weight = tied


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(11, 6)
        self.block = Block()
        self.block_again = self.block
        self.head = Head(self.embed.weight)


class Lm(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(40, 8)
        self.layers = nn.Sequential(Block(8), Block(8), Block(8), Block(8))
        self.norm = nn.LayerNorm(8)
        self.head = Head(self.embed.weight)


def trees():
    mlp = nn.Sequential(nn.Linear(7, 13), nn.ReLU(), nn.Linear(13, 5), nn.Tanh(), nn.Linear(5, 3))
    nested = nn.Sequential(Block(), Block(), nn.LayerNorm(6))
    nested._no_split_modules = ["Block"]  # what calculate_maximum_sizes reads
    lm = Lm()
    lm._no_split_modules = ["Block"]
    return {"mlp": mlp, "tied": Tied(), "nested": nested, "lm": lm}


SPECIAL = {"mlp": "0.weight", "tied": "embed.weight", "nested": "0.proj.weight", "lm": "layers.0.proj.weight"}


def tie(model, groups):
    """Every name of each group made to hold the group's first parameter."""
    for group in groups:
        shared = model.get_parameter(group[0])
        for name in group[1:]:
            owner, _, leaf = name.rpartition(".")
            setattr(model.get_submodule(owner), leaf, shared)


def layer(result):
    size, names = result
    return [size, list(names)]


def python_results(name, model):
    return {
        "on_meta": [n for n, t in model.named_parameters() if t.is_meta]
        + [n for n, t in model.named_buffers() if t.is_meta],
        "sizes": dict(compute_module_sizes(model)),
        "sizes_bf16": dict(compute_module_sizes(model, dtype=torch.bfloat16)),
        "sizes_fp16_special": dict(
            compute_module_sizes(model, dtype=torch.float16, special_dtypes={SPECIAL[name]: torch.float32})
        ),
        "buffers_only": dict(compute_module_sizes(model, buffers_only=True)),
        "maximum": [calculate_maximum_sizes(model)[0], layer(calculate_maximum_sizes(model)[1])],
        "max_layer_of_children": layer(
            get_max_layer_size(list(model.named_children()), compute_module_sizes(model), ["Block", "Linear"])
        ),
        # Accelerate's order of the groups follows a set; compare them sorted.
        "tied": sorted(sorted(group) for group in find_tied_parameters(model)),
    }


def budget(max_memory):
    """JSON's device names to Accelerate's: GPU ordinals are integers."""
    return {int(k) if k.isdigit() else k: v for k, v in max_memory.items()}


def keywords(options):
    return {
        "no_split_module_classes": options["no_split_module_classes"],
        "dtype": torch.bfloat16 if options["dtype"] == "bfloat16" else None,
    }


def within(name, module):
    return module == "" or name == module or name.startswith(module + ".")


def uncovered(model, device_map):
    """The tensors no entry of the map covers (what check_device_map reports)."""
    names = [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()]
    return {n for n in names if not any(within(n, m) for m in device_map)}


def compare_device_map(model, theirs, mine, what):
    """Ours must be Accelerate's map, plus an entry for each tensor that
    Accelerate's map leaves uncovered (a split module's own buffers)."""
    theirs = {k: str(v) for k, v in theirs.items()}
    extra = set(mine) - set(theirs)
    problems = []
    if set(theirs) - set(mine):
        problems.append(f"missing entries {sorted(set(theirs) - set(mine))}")
    if extra != uncovered(model, theirs):
        problems.append(f"extra entries {sorted(extra)}, Accelerate leaves uncovered {sorted(uncovered(model, theirs))}")
    if uncovered(model, mine):
        problems.append(f"ours leaves {sorted(uncovered(model, mine))} uncovered")
    for name in set(theirs) & set(mine):
        if theirs[name] != mine[name]:
            problems.append(f"{name}: Accelerate {theirs[name]}, ours {mine[name]}")
    if problems:
        return [f"{what}:\n  Accelerate: {theirs}\n  ours:       {mine}\n  " + "\n  ".join(problems)]
    return []


def check_device_maps(models, cases, failures):
    differences = []
    for case in cases:
        model = models[case["tree"]]
        options = case["options"]
        what = f"infer_auto_device_map {case['tree']} {case['max_memory']} {options}"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                theirs = infer_auto_device_map(
                    model,
                    max_memory=budget(case["max_memory"]),
                    clean_result=options["clean_result"],
                    offload_buffers=options["offload_buffers"],
                    **keywords(options),
                )
            except IndexError:
                failures.append(what)
                continue
        warned = any("offload_buffers" in str(w.message) for w in caught)
        differences += compare_device_map(model, theirs, case["device_map"], what)
        if warned != case["warned"]:
            differences.append(f"{what}: Accelerate warned {warned}, ours {case['warned']}")
    return differences


def check_balanced(models, cases, failures):
    differences = []
    for case in cases:
        model = models[case["tree"]]
        options = case["options"]
        what = f"get_balanced_memory {case['tree']} {case['max_memory']} {options}"
        theirs = get_balanced_memory(
            model, max_memory=budget(case["max_memory"]), low_zero=options["low_zero"], **keywords(options)
        )
        mine = budget(case["balanced"])
        if theirs != mine:
            differences.append(f"{what}:\n  Accelerate: {theirs}\n  ours:       {mine}")
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                their_map = infer_auto_device_map(model, max_memory=dict(theirs), **keywords(options))
            except IndexError:
                failures.append(what + " then infer_auto_device_map")
                continue
        differences += compare_device_map(model, their_map, case["device_map"], what + " then infer_auto_device_map")
    return differences


def offload_reference():
    """The tensors module_sizes_dump.cpp offloads, built alike."""
    return {
        "embed.weight": torch.arange(24, dtype=torch.float32).reshape(4, 6) / 7,
        "half": torch.arange(10, dtype=torch.float32).to(torch.float16) * 0.5,
        "bf16": (torch.arange(12, dtype=torch.float32) * 0.25).reshape(3, 4).to(torch.bfloat16),
        "double": torch.arange(4, dtype=torch.float64).reshape(2, 2) / 3,
        "ids": torch.arange(5, dtype=torch.int64) * 3 - 4,
        "small": torch.arange(-3, 3, dtype=torch.int64).to(torch.int8),
        "bytes": torch.arange(7, dtype=torch.int64).to(torch.uint8),
        "mask": torch.tensor([True, False, True]),
        "scalar": torch.tensor(2.5, dtype=torch.float64),
    }


def check_offload(ours, theirs):
    """Reads our folder with Accelerate's reader; writes theirs for ours to read."""
    with open(f"{ours}/index.json") as f:
        index = json.load(f)
    differences = []
    for name, expected in offload_reference().items():
        if name not in index:
            differences.append(f"offload {name}: not in our index.json")
            continue
        got = load_offloaded_weight(f"{ours}/{name}.dat", index[name])
        if got.dtype != expected.dtype or got.shape != expected.shape or not torch.equal(got, expected):
            differences.append(f"offload {name}: Accelerate reads {got!r} where we wrote {expected!r}")
    offload_state_dict(theirs, offload_reference())
    return differences


def main():
    logging.getLogger("accelerate").setLevel(logging.ERROR)  # "Device 0 is not available": no GPU is needed
    empty = len(sys.argv) > 1 and sys.argv[1] == "--empty"
    if empty:
        del sys.argv[1]
    with open(sys.argv[1]) as f:
        ours = json.load(f)
    differences = []
    checked = 0
    if empty:
        ties = {name: find_tied_parameters(model) for name, model in trees().items()}
        with init_empty_weights(include_buffers=True):
            models = trees()
        for name, model in models.items():
            tie(model, ties[name])
    else:
        models = trees()
    for name, model in models.items():
        theirs = python_results(name, model)
        mine = ours[name]
        mine["tied"] = sorted(sorted(group) for group in mine["tied"])
        for key, value in theirs.items():
            checked += 1
            if mine.get(key) != value:
                differences.append(f"{name} {key}:\n  Accelerate: {value}\n  ours:       {mine.get(key)}")
    # Accelerate's infer_auto_device_map fails (IndexError) on a tree with a
    # module registered under two names: it looks for the second name among
    # the children, which list the module once. Ours places such a tree; those
    # cases are counted, and must be the only ones Accelerate cannot run.
    failures = []
    if len(sys.argv) == 4:
        differences += check_offload(sys.argv[2], sys.argv[3])
    differences += check_device_maps(models, ours["device_maps"], failures)
    differences += check_balanced(models, ours["balanced"], failures)
    differences += [f"{what}: Accelerate fails on a tree without a module registered twice"
                    for what in failures if not what.split()[1] == "tied"]
    if differences:
        print("\n".join(differences))
        print(f"{len(differences)} difference(s)")
        return 1
    maps = len(ours["device_maps"]) - sum(what.startswith("infer_auto_device_map") for what in failures)
    budgets = len(ours["balanced"]) - sum(what.startswith("get_balanced_memory") for what in failures)
    print(f"{checked} results of compute_module_sizes, calculate_maximum_sizes, get_max_layer_size and "
          f"find_tied_parameters, {maps} device maps of infer_auto_device_map and {budgets} budgets of "
          f"get_balanced_memory (with their maps) agree with Accelerate's on {len(models)} trees"
          f"{' built empty (the meta device)' if empty else ''}; Accelerate "
          f"could not run the other {len(failures)} cases, all on the tree with a module registered twice")
    if len(sys.argv) == 4:
        print(f"Accelerate reads back every one of the {len(offload_reference())} tensors of our offload folder")
    return 0


if __name__ == "__main__":
    sys.exit(main())
