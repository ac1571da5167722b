#!/usr/bin/env python3
"""Regenerates the synthetic hwloc topologies used by the affinity tests.

hwloc's synthetic descriptions cannot hold I/O objects, so the CPU/NUMA part
comes from `lstopo --of xml -i "<synthetic>"` and the GPUs are added here as
PCI bridges + PCI devices (class 0302, 3D controller) under the object they
are local to. Run from this folder: ./generate.py (needs hwloc's lstopo).

  2pkg-2numa-8core-smt2-numa-gpus.xml     one GPU under each NUMA domain's group
  2pkg-2numa-8core-smt2-package-gpus.xml  two GPUs under each package (local to
                                          both NUMA domains of that package)

SMT siblings are numbered like most x86 servers: core c holds PUs c and c+32.
"""
import subprocess
import xml.etree.ElementTree as ET

PU_INDEXES = ",".join(str(x) for core in range(32) for x in (core, core + 32))
SYNTHETIC = f"pack:2 numa:2 core:8 pu:2(indexes={PU_INDEXES})"
# (bus id, bridge bus range) of the four GPUs, in the order they are attached.
GPUS = [("0000:17:00.0", "0000:[17-17]"), ("0000:31:00.0", "0000:[31-31]"),
        ("0000:b1:00.0", "0000:[b1-b1]"), ("0000:ca:00.0", "0000:[ca-ca]")]


def synthetic_tree():
    xml = subprocess.run(["lstopo-no-graphics", "-i", SYNTHETIC, "--of", "xml", "-"],
                         check=True, capture_output=True, text=True).stdout
    return ET.ElementTree(ET.fromstring(xml))


def attach_gpu(parent, gp_index, bus_id, bus_range):
    bridge = ET.SubElement(parent, "object", {
        "type": "Bridge", "gp_index": str(gp_index), "bridge_type": "0-1",
        "depth": "0", "bridge_pci": bus_range})
    gpu = ET.SubElement(bridge, "object", {
        "type": "PCIDev", "gp_index": str(gp_index + 1), "pci_busid": bus_id,
        "pci_type": "0302 [10de:20b0] [10de:134f] a1", "pci_link_speed": "0.000000"})
    ET.SubElement(gpu, "info", {"name": "PCIVendor", "value": "NVIDIA Corporation"})


def write(tree, parents, path):
    root = tree.getroot()
    for info in root.iter("info"):
        if info.get("name") == "ProcessName":
            info.set("value", "generate.py")
    for i, ((bus_id, bus_range), parent) in enumerate(zip(GPUS, parents)):
        attach_gpu(parent, 10000 + 2 * i, bus_id, bus_range)
    ET.indent(tree, space="  ")
    with open(path, "w", encoding="utf-8") as out:
        out.write('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n')
        tree.write(out, encoding="unicode")
        out.write("\n")


def main():
    tree = synthetic_tree()
    numa_groups = [g for g in tree.getroot().iter("object")
                   if g.get("type") == "Group" and any(c.get("type") == "NUMANode" for c in g)]
    write(tree, numa_groups, "2pkg-2numa-8core-smt2-numa-gpus.xml")

    tree = synthetic_tree()
    packages = [p for p in tree.getroot().iter("object") if p.get("type") == "Package"]
    write(tree, [packages[0], packages[0], packages[1], packages[1]],
          "2pkg-2numa-8core-smt2-package-gpus.xml")


if __name__ == "__main__":
    main()
