#!/usr/bin/env bash
# `make e2e-kind`: the integration suite on a kind cluster (real nodes, kubelet, Job controller),
# and Jobs whose pods really run, under kueued run outside the cluster as the systemd unit runs it.
#
# Where docker or kind is missing, or docker's daemon does not answer, it says so in one line and
# exits 0 having run nothing: the suite was written for machines that have them (a CI runner, a
# laptop), and this check must stay the first thing the script does.
#
#   1. kind create cluster (deleted again on exit, whatever happens: the trap below)
#   2. `kueued manifests | kubectl apply --server-side -f -`: CRDs, RBAC, namespace kueued-system
#   3. tests/integration with KUEUED_TEST_KUBECONFIG=<kind's kubeconfig>: each test starts its own
#      `kueued run` as the kueued ServiceAccount (a token; conftest.py).  Tests that need our own CA,
#      binaries or audit log skip; test_jobs_api.py is left out (it stamps Job status by hand, which
#      a real Job controller would race): tests/e2e/test_kind_jobs.py covers Jobs here instead.
#   4. `kueued run --leader-elect --metrics-port ...` in the background, with the unit's flags and a
#      kubeconfig of the ServiceAccount, and tests/e2e/test_kind_jobs.py against it: busybox Jobs
#      that run, finish by themselves and give their quota back.  Then SIGTERM: exit 0, lease released.
#
# Environment: KUEUED_KIND_CLUSTER (name, default kueued-e2e-<pid>), KUEUED_KIND_IMAGE (node image,
# default kind's), KUEUED_E2E_METRICS_PORT (default 9464), KUEUED_E2E_KEEP=1 keeps the cluster.
set -euo pipefail

unavailable() {
    echo "e2e-kind: docker/kind not available here; the kind suite runs on machines that have them"
    exit 0
}
command -v docker >/dev/null 2>&1 || unavailable
command -v kind >/dev/null 2>&1 || unavailable
docker info >/dev/null 2>&1 || unavailable

cd "$(dirname "$0")/../.."
ROOT=$PWD
"${MAKE:-make}" -s .venv/.installed
BIN=$ROOT/.venv/bin
CLUSTER=${KUEUED_KIND_CLUSTER:-kueued-e2e-$$}
PORT=${KUEUED_E2E_METRICS_PORT:-9464}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kueued-e2e.XXXXXX")
ADMIN=$WORK/admin.kubeconfig
DAEMON_PID=

say() { echo "[e2e-kind] $*" >&2; }

cleanup() {
    if [[ -n $DAEMON_PID ]] && kill -0 "$DAEMON_PID" 2>/dev/null; then
        kill -TERM "$DAEMON_PID"; wait "$DAEMON_PID" || true
    fi
    if [[ ${KUEUED_E2E_KEEP:-0} == 1 ]]; then
        say "kept: kind cluster $CLUSTER (kind delete cluster --name $CLUSTER), logs in $WORK"
    else
        kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT

if command -v kubectl >/dev/null 2>&1; then
    KUBECTL=$(command -v kubectl)
else  # the one the local control plane builds (needs Go the first time)
    "$BIN/python" -m kueued.devcluster build >/dev/null
    eval "$("$BIN/python" -m kueued.devcluster env)"
fi
k() { "$KUBECTL" --kubeconfig "$ADMIN" "$@"; }

say "creating kind cluster $CLUSTER"
kind create cluster --name "$CLUSTER" --kubeconfig "$ADMIN" --wait 180s ${KUEUED_KIND_IMAGE:+--image "$KUEUED_KIND_IMAGE"}
"$BIN/kueued" manifests | k apply --server-side --field-manager=kueued -f -
k wait --for=condition=Established --timeout=60s crd --all

# kueued's own kubeconfig, as /etc/kueued/kubeconfig would be: the ServiceAccount the manifests bind
KUEUED_KUBECONFIG=$WORK/kueued.kubeconfig
cp "$ADMIN" "$KUEUED_KUBECONFIG"
chmod 600 "$KUEUED_KUBECONFIG"
TOKEN=$(k create token kueued -n kueued-system --duration=4h)
"$KUBECTL" --kubeconfig "$KUEUED_KUBECONFIG" config set-credentials kueued --token="$TOKEN" >/dev/null
"$KUBECTL" --kubeconfig "$KUEUED_KUBECONFIG" config set-context --current --user=kueued >/dev/null

export KUEUED_TEST_KUBECONFIG=$ADMIN KUEUED_REQUIRE_CONTROL_PLANE=1 KUEUED_E2E_KUBECTL=$KUBECTL
rc=0
say "the integration suite against kind"
"$BIN/python" -m pytest -q tests/integration --ignore=tests/integration/test_jobs_api.py || rc=1

say "kueued run as the systemd unit runs it, and Jobs with real pods"
KUBECONFIG=$KUEUED_KUBECONFIG PYTHONUNBUFFERED=1 "$BIN/kueued" --log-format json --log-level INFO \
    run --leader-elect --metrics-port "$PORT" 2>"$WORK/kueued.log" &
DAEMON_PID=$!
KUEUED_E2E_KIND=1 KUEUED_E2E_METRICS="http://127.0.0.1:$PORT" \
    "$BIN/python" -m pytest -q tests/e2e/test_kind_jobs.py || rc=1
kill -TERM "$DAEMON_PID"
if ! wait "$DAEMON_PID"; then
    say "kueued run did not exit 0 on SIGTERM"; rc=1
fi
DAEMON_PID=
if ! grep -q '"event": "leader_released"' "$WORK/kueued.log"; then
    say "kueued run did not release its lease on SIGTERM"; rc=1
fi
if [[ $rc != 0 ]]; then
    say "failed; kueued's log ends:"; tail -n 40 "$WORK/kueued.log" >&2
fi
exit $rc
