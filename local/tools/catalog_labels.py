#!/usr/bin/env python3
"""Extracts the Karpenter AWS instance-type labels the base catalog lacks.

Reads Karpenter's generated instance-type reference (aws/karpenter-provider-aws
website/content/en/preview/reference/instance-types.md, produced by
hack/docs/instancetypes_gen) and writes, for every type of
model/catalog/ec2-instance-types-us-east-1.json, the labels below as
model/catalog/ec2-instance-type-labels-us-east-1.json (one type per line).

    python3 local/tools/catalog_labels.py instance-types.md > model/catalog/ec2-instance-type-labels-us-east-1.json
"""
import json
import os
import re
import sys

KEYS = [
    "instance-capability-flex",
    "instance-cpu-manufacturer",
    "instance-cpu-sustained-clock-speed-mhz",
    "instance-ebs-bandwidth",
    "instance-encryption-in-transit-supported",
    "instance-gpu-memory",
    "instance-local-nvme",
    "instance-network-bandwidth",
]


def main():
    doc = open(sys.argv[1]).read()
    here = os.path.dirname(os.path.abspath(__file__))
    catalog = json.load(open(os.path.join(here, "..", "..", "model", "catalog", "ec2-instance-types-us-east-1.json")))
    labels = {}
    name = None
    for line in doc.splitlines():
        m = re.match(r"^### `([^`]+)`", line)
        if m:
            name = m.group(1)
            labels[name] = {}
            continue
        m = re.match(r"^\s*\|karpenter\.k8s\.aws/([a-z-]+)\|([^|]*)\|", line)
        if m and name and m.group(1) in KEYS:
            labels[name][m.group(1)] = m.group(2)
    out = []
    for it in catalog["instanceTypes"]:
        out.append('  %s: %s' % (json.dumps(it["name"]), json.dumps(labels.get(it["name"], {}), sort_keys=True, separators=(",", ":"))))
    sys.stdout.write('{\n  "source": "aws/karpenter-provider-aws website/content/en/preview/reference/instance-types.md",\n  "instanceTypes": {\n  ' + ",\n  ".join(out) + "\n  }\n}\n")


if __name__ == "__main__":
    main()
