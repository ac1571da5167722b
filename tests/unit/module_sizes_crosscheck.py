#!/usr/bin/env python3
"""Cross-check of the big-model utilities against Hugging Face Accelerate.

Builds in torch.nn the trees that tests/unit/module_trees.hpp builds in C++,
runs Accelerate's own functions on them, and compares every result with the
JSON that module_sizes_dump printed for the C++ trees. Exits 0 when all
agree, 1 on the first list of differences.

usage: module_sizes_crosscheck.py <json from module_sizes_dump>
"""
import json
import sys

import torch
from torch import nn
from accelerate.utils import calculate_maximum_sizes, compute_module_sizes, find_tied_parameters, get_max_layer_size


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 6)
        self.norm = nn.LayerNorm(6)
        self.register_buffer("scale", torch.ones(6))
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


def trees():
    mlp = nn.Sequential(nn.Linear(7, 13), nn.ReLU(), nn.Linear(13, 5), nn.Tanh(), nn.Linear(5, 3))
    nested = nn.Sequential(Block(), Block(), nn.LayerNorm(6))
    nested._no_split_modules = ["Block"]  # what calculate_maximum_sizes reads
    return {"mlp": mlp, "tied": Tied(), "nested": nested}


SPECIAL = {"mlp": "0.weight", "tied": "embed.weight", "nested": "0.proj.weight"}


def layer(result):
    size, names = result
    return [size, list(names)]


def python_results(name, model):
    return {
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


def main():
    with open(sys.argv[1]) as f:
        ours = json.load(f)
    differences = []
    checked = 0
    for name, model in trees().items():
        theirs = python_results(name, model)
        mine = ours[name]
        mine["tied"] = sorted(sorted(group) for group in mine["tied"])
        for key, value in theirs.items():
            checked += 1
            if mine.get(key) != value:
                differences.append(f"{name} {key}:\n  Accelerate: {value}\n  ours:       {mine.get(key)}")
    if differences:
        print("\n".join(differences))
        return 1
    print(f"{checked} results of compute_module_sizes, calculate_maximum_sizes, get_max_layer_size and "
          f"find_tied_parameters agree with Accelerate's on {len(ours)} trees")
    return 0


if __name__ == "__main__":
    sys.exit(main())
