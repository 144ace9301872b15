"""Generate a large organisation: ClusterQueues under a 4-level cohort tree, pending workloads.

    python bench/generate_tree.py --cluster-queues 1000 --workloads 50000 > /tmp/big.yaml
    python bench/generate_tree.py --runtime 5 > /tmp/timed.yaml   # kueued.io/runtime 1..5 s each

Shape: root -> 4 divisions -> 5 departments each -> 10 groups each (4 cohort levels,
200 leaf cohorts) -> ClusterQueues spread evenly over the groups.  Quota sits at every
level (some nominal at inner cohorts, borrowing and lending limits on a share of the
nodes) so the tree math is exercised, and the workloads ask more than the tree holds,
so the run ends with a mix of admitted and pending workloads.  ``--quota-scale N``
multiplies every quota and limit by N (at 10 the tree holds nearly everything at once).  With ``--runtime N`` every
workload runs a whole number of seconds in 1..N (``kueued.io/runtime``), so a timed
``simulate`` admits them all in waves (few distinct event times: cheap virtual clock).
"""

from __future__ import annotations

import argparse
import random
import sys

import yaml


def generate(n_cq: int, n_wl: int, seed: int = 1, runtime: int | None = None,
             preemption: bool = True, quota_scale: int = 1) -> list[dict]:
    rnd = random.Random(seed)
    docs: list[dict] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}},
                        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                         "metadata": {"name": "default"}}]

    def cohort(name: str, parent: str | None, nominal: int, limits: bool) -> dict:
        nominal *= quota_scale
        res: dict = {"name": "cpu", "nominalQuota": str(nominal)}
        if limits and parent:
            res["borrowingLimit"] = str(nominal * 4 + 10)
            res["lendingLimit"] = str(nominal)
        spec: dict = {"resourceGroups": [{"coveredResources": ["cpu"],
                                          "flavors": [{"name": "default", "resources": [res]}]}]}
        if parent:
            spec["parentName"] = parent
        return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name}, "spec": spec}

    docs.append(cohort("root", None, 100, False))
    groups = []
    for d in range(4):
        docs.append(cohort(f"div-{d}", "root", 20, d % 2 == 0))
        for p in range(5):
            docs.append(cohort(f"dept-{d}-{p}", f"div-{d}", 5, p % 2 == 0))
            for g in range(10):
                name = f"group-{d}-{p}-{g}"
                docs.append(cohort(name, f"dept-{d}-{p}", 0, False))
                groups.append(name)
    for i in range(n_cq):
        res: dict = {"name": "cpu", "nominalQuota": str(10 * quota_scale)}
        if i % 3 == 0:
            res["borrowingLimit"] = str(20 * quota_scale)
        docs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": f"cq-{i}"},
                     "spec": {"cohortName": groups[i % len(groups)], "namespaceSelector": {},
                              "queueingStrategy": "BestEffortFIFO",
                              "preemption": ({"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
                                             if preemption else {}),
                              "resourceGroups": [{"coveredResources": ["cpu"],
                                                  "flavors": [{"name": "default", "resources": [res]}]}]}})
        docs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                     "metadata": {"name": f"lq-{i}", "namespace": "bench"}, "spec": {"clusterQueue": f"cq-{i}"}})
    for w in range(n_wl):
        cpu = rnd.choice(["1", "2", "4", "500m"])
        meta: dict = {"name": f"wl-{w}", "namespace": "bench",
                      "creationTimestamp": f"2026-01-01T{w // 3600 % 24:02d}:{w // 60 % 60:02d}:{w % 60:02d}Z"}
        if runtime:
            meta["annotations"] = {"kueued.io/runtime": str(rnd.randint(1, runtime))}
        docs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": meta,
                     "spec": {"queueName": f"lq-{rnd.randrange(n_cq)}", "priority": rnd.choice([0, 0, 0, 10]),
                              "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                                  {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]}})
    return docs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cluster-queues", type=int, default=1000)
    ap.add_argument("--workloads", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runtime", type=int, default=None, help="give each workload a runtime of 1..N seconds")
    ap.add_argument("--no-preemption", action="store_true",
                    help="ClusterQueues without preemption policies (the quota engine alone)")
    ap.add_argument("--quota-scale", type=int, default=1, help="multiply every quota and limit by N")
    args = ap.parse_args()
    yaml.safe_dump_all(generate(args.cluster_queues, args.workloads, args.seed, args.runtime,
                                 preemption=not args.no_preemption, quota_scale=args.quota_scale), sys.stdout,
                       default_flow_style=None, sort_keys=False)


if __name__ == "__main__":
    main()
