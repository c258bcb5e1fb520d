#!/usr/bin/env python3
"""calibration_json.py -- what the validation report reads of a calibration: each fitted row's cross-validated
error, from the result.json of one or more `kernbench calibrate` runs, and the values the runs produced. Which
parameters were fitted on which rows is not written here: the config declares it beside each fitted value
(kernbench.provenance), and tests/python/test_provenance.py checks that the two agree.

    scripts/calibration_json.py OUT TARGET.json RUN [RUN ...] --about TEXT [--merge]

RUN names a folder OUT/RUN holding a result.json. A row fitted in a later run whose fold could not predict it
(a run fitting one group) takes its error from an earlier run that predicted it, if one did: that is what
leaving it out of the later fit means (scripts/calibrate_gpu.sh's inference row). Used by
scripts/calibrate_k200.sh and scripts/calibrate_gpu.sh. ``--merge`` keeps what TARGET.json already holds from
other calibrations (scripts/calibrate_nccl.sh adds the NCCL rows beside calibrate_gpu.sh's): rows, values and
commands of these runs replace their own, the rest stays.
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("target")
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--about", required=True)
    ap.add_argument("--merge", action="store_true", help="keep TARGET.json's other rows, values and commands")
    a = ap.parse_args()
    runs = {name: json.load(open(f"{a.out}/{name}/result.json")) for name in a.runs}
    rows = {}
    for name, r in runs.items():
        for x in r["rows"]:
            if x["role"] == "fitted":
                rows[x["id"]] = {"run": name, "error": x["error"], "cv_error": x["cv_error"], "cv_fold": x["cv_fold"]}
    for rid, row in rows.items():
        if row["cv_error"] is not None:
            continue
        for name in a.runs[:a.runs.index(row["run"])]:
            earlier = {x["id"]: x for x in runs[name]["rows"]}.get(rid)
            if earlier is not None and earlier["role"] == "predicted":
                row["cv_error"], row["cv_fold"] = earlier["error"], f"{name} (a prediction there)"
    doc = {"about": a.about, "commands": [r["command"].replace(a.out, "OUT") for r in runs.values()],
           "values": {f["path"]: f["value"] for r in runs.values() for f in r["free"]}, "rows": rows}
    if a.merge:
        try:
            old = json.load(open(a.target))
        except FileNotFoundError:
            old = {}
        prefixes = {p.split(".", 1)[0] for p in doc["values"]}  # the sections these runs fit (nccl, gpu, ...)
        before = old.get("about", "")
        doc["about"] = before if a.about in before else "; ".join(x for x in (before, a.about) if x)
        doc["commands"] = [c for c in old.get("commands", []) if not any(f" {p}." in c for p in prefixes)] + \
            doc["commands"]
        doc["values"] = {**{k: v for k, v in old.get("values", {}).items() if k.split(".", 1)[0] not in prefixes},
                         **doc["values"]}
        doc["rows"] = {**old.get("rows", {}), **rows}
    with open(a.target, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    print(f"calibration_json: wrote {a.target}")


if __name__ == "__main__":
    main()
