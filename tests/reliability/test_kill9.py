"""kill -9, a hundred times, in the middle of a 2,000-Workload run: nothing lost, nothing doubled.

The tree is :meth:`~tests.reliability.scenario.Tree.small` (two Cohorts, four ClusterQueues,
10 cpus on demand and 5 spot each, borrowing allowed).  Three things happen at once:

- a **creator** thread submits 2,000 Workloads (1 to 3 cpus, seeded priorities, so queues
  borrow and preempt) over ``CREATE_S`` seconds;
- an **observer** thread reads every Workload and ClusterQueue about once a second,
  records any breach of the quota (:func:`~tests.reliability.scenario.observe`: a queue
  or Cohort over what the tree allows, an admission to the wrong queue) and finishes a
  seeded share of the admitted Workloads (the ``Finished`` condition, on the version read,
  as a Job would), so the run moves;
- the test's own thread starts ``kueued run`` and kills it with SIGKILL at a seeded random
  point, ``KILLS`` times, restarting it at once each time.  Where a kill lands is aimed
  (``AIMS``): a tenth during start-up, the rest within a second or so after the daemon
  logs that it connected (the initial lists, the first rounds and their commits) or that
  it is ready (rounds, commits, two-phase evictions, status writes).  Aimed at events
  rather than at a fixed delay, because Python's imports take a couple of seconds on a
  busy machine and a fixed delay would mostly kill a process that had not started yet.

Afterwards one last daemon runs until the cluster settles, and then: every Workload created
still exists and is admitted, finished, or pending with a reason (zero lost); no state read
during the whole run broke the quota (zero doubly admitted); every ClusterQueue's status
usage equals the sum of its admitted Workloads; no daemon log shows an exception, and the
last one exits cleanly on SIGTERM.  Figures go to ``build/reliability/kill9.json``.

Paced for a two-core machine shared with other work (about four minutes there); the
pacing (``CREATE_S``, the kill delays, ``POLL_S``) scales, the counts do not.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.integration.daemon import Daemon
from tests.reliability.api import Admin, Credentials
from tests.reliability.conftest import record
from tests.reliability.scenario import State, Tree, crash_signs, observe, settle, workload

SEED = 9
KILLS = 100
WORKLOADS = 2000
CREATE_S = 150.0  # the creator's pace: all 2,000 submitted by then
POLL_S = 1.0  # the observer's
FINISH_SHARE = 0.25  # of the admitted Workloads, finished at each look
AIMS = {  # where a kill is aimed: (share of the kills, the log event it waits for, seconds after it)
    "start-up": (0.1, None, (0.1, 1.5)),  # imports, connecting: after the process starts
    "sync": (0.45, "kube_configured", (0.0, 1.2)),  # the initial lists, the first rounds and commits
    "work": (0.45, "daemon_ready", (0.0, 1.0)),  # rounds, commits, evictions, status writes
}


class Observer(threading.Thread):
    """Reads the cluster until stopped; records breaches; finishes a share of what is admitted."""

    def __init__(self, admin: Admin, tree: Tree, rng: random.Random) -> None:
        super().__init__(name="observer", daemon=True)
        self.admin, self.tree, self.rng = admin, tree, rng
        self.stopping = threading.Event()
        self.breaches: list[str] = []
        self.looks = 0
        self.finished = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stopping.wait(POLL_S):
                state = observe(self.admin, self.tree)
                self.looks += 1
                self.breaches += state.breaches
                self._finish_some(state)
        except BaseException as exc:  # reported by the test, in its thread
            self.error = exc

    def _finish_some(self, state: State) -> None:
        admitted = sorted(name for name, where in state.placement.items() if ":" in where)
        chosen = {name for name in admitted if self.rng.random() < FINISH_SHARE}
        if not chosen:
            return
        for name in sorted(chosen):
            self.finished += self.admin.finish(state.raw[name])


class Creator(threading.Thread):
    def __init__(self, admin: Admin, tree: Tree, rng: random.Random) -> None:
        super().__init__(name="creator", daemon=True)
        self.admin, self.tree = admin, tree
        queues = [q.name for q in tree.queues]
        self.plan = [(f"w{i:04d}", rng.choice(queues), rng.randint(1, 3), rng.randint(0, 1000))
                     for i in range(WORKLOADS)]
        self.created: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            started = time.monotonic()
            for i, (name, queue, cpu, priority) in enumerate(self.plan):
                self.admin.create(workload(self.tree, name, queue, cpu=cpu, priority=priority))
                self.created.append(name)
                ahead = started + CREATE_S * (i + 1) / WORKLOADS - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
        except BaseException as exc:
            self.error = exc


def _aim(rng: random.Random) -> str:
    draw, edge = rng.random(), 0.0
    for aim, (share, _, _) in AIMS.items():
        edge += share
        if draw < edge:
            return aim
    return aim


@pytest.mark.timeout(900)
def test_a_hundred_kill_9s_lose_and_double_nothing(installed: Any, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    admin = Admin(Credentials(installed.kubeconfig))
    tree = Tree.small("kill9", on_demand=10, spot=5)
    admin.apply(*tree.manifests())
    logs = tmp_path / "logs"
    logs.mkdir()
    creator = Creator(admin, tree, random.Random(rng.random()))
    observer = Observer(admin, tree, random.Random(rng.random()))
    started = time.monotonic()
    creator.start()
    observer.start()
    aims: Counter[str] = Counter()
    ready_times: list[float] = []
    daemons: list[Daemon] = []
    try:
        for kill in range(KILLS):
            daemon = Daemon(installed, logs / f"{kill:03d}.log", "--no-job-integration").start()
            spawned = time.monotonic()
            daemons.append(daemon)
            aim = _aim(rng)
            aims[aim] += 1
            _, event, delay = AIMS[aim]
            if event is not None:
                daemon.wait_for(event, timeout=60.0)
                if event == "daemon_ready":
                    ready_times.append(time.monotonic() - spawned)
            time.sleep(rng.uniform(*delay))
            assert daemon.proc is not None and daemon.proc.poll() is None, f"kueued died by itself:\n{daemon.tail()}"
            daemon.kill()
        killing_s = time.monotonic() - started
        creator.join()
        assert creator.error is None, creator.error
        last = Daemon(installed, logs / "last.log", "--no-job-integration").start()
        daemons.append(last)

        def alive() -> str | None:
            assert last.proc is not None
            return None if last.proc.poll() is None else f"kueued exited ({last.proc.returncode}):\n{last.tail()}"

        observer.stopping.set()  # nothing finishes any more: the cluster can settle
        observer.join()
        assert observer.error is None, observer.error
        final = settle(admin, tree, timeout=180.0, quiet=3.0, alive=alive)
        assert last.stop() == 0, last.tail()
        elapsed = time.monotonic() - started
    finally:
        observer.stopping.set()
        for d in daemons:
            if d.proc is not None and d.proc.poll() is None:
                d.kill()
        creator.join()
        admin.delete_all(tree.namespace, *tree.cluster_scoped())
    lost = sorted(set(creator.created) - set(final.placement))
    signs = [s for d in daemons[:-1] for s in crash_signs(d.log_path.read_text().splitlines(), killed=True)]
    signs += crash_signs(daemons[-1].log_path.read_text().splitlines())
    record("kill9", {
        "seed": SEED, "kills": KILLS, "kills_aimed": dict(aims),
        "kills_before_ready": sum(1 for d in daemons[:-1] if "daemon_ready" not in d.log_path.read_text()),
        "kills_after_a_commit": sum(1 for d in daemons[:-1] if "workload_admitted" in d.log_path.read_text()
                                    or "workload_evicted" in d.log_path.read_text()),
        "workloads": len(creator.created), "lost": len(lost), "breaches_seen": len(observer.breaches),
        "states_checked": observer.looks, "finished_by_test": observer.finished,
        "final": {"admitted": final.count("admitted"), "pending": final.count("pending"),
                  "finished": final.count("finished")},
        "seconds": round(elapsed, 1), "killing_seconds": round(killing_s, 1),
        "ready_seconds_median": round(statistics.median(ready_times), 2) if ready_times else None,
    })
    assert not lost, f"{len(lost)} Workloads lost: {lost[:20]}"
    assert not observer.breaches, f"{len(observer.breaches)} breaches, first: {observer.breaches[:5]}"
    assert not signs, "\n".join(signs[:5])
    assert all(d.proc is not None and d.proc.returncode == -9 for d in daemons[:-1])
