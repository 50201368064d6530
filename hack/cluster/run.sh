#!/usr/bin/env bash
# `make run`: the operator on a real local cluster, end to end.
#
#   hack/cluster/run.sh
#
# 1. builds the images (hack/images/images.sh), what the cluster runs
#    (hack/cluster/cluster.sh build) and Helm, one after another;
# 2. starts the cluster (hack/cluster/cluster.sh up) and loads the images;
# 3. deploys the NetworkPolicy agent (hack/cluster/network-policies:
#    kube-network-policies, nftables + nfqueue), so that NetworkPolicies are
#    enforced on the node, then cluster DNS (hack/cluster/dns: CoreDNS for
#    cluster.local only) and metrics-server (hack/cluster/metrics-server:
#    the resource metrics API, metrics.k8s.io);
# 4. installs charts/orchestratord as release "orchestratord" in namespace
#    orchestratord, using the local images (pullPolicy Never), with small
#    environmentd resources: the stand-in needs little, and the chart's
#    default (upstream's: 1 CPU each) would leave a 2-core node unable to
#    run two generations during a rollout; a cluster replica size "local"
#    (20m CPU, 64 MiB) for the bootstrap clusters, whose clusterd pods
#    (stand-ins too) then run on the node; and with upstream's
#    NetworkPolicies for the environments on (internal, ingress and egress,
#    the CIDRs at their default 0.0.0.0/0), so that the sample runs under
#    them; and with pod metrics on (observability.podMetrics.enabled), so
#    that environmentd reads its clusterd pods' usage from metrics-server;
# 5. applies a sample Materialize (apiVersion v1: the webhook converts it) in
#    namespace materialize-sample whose environmentd is the TEST STAND-IN
#    localhost/standin/environmentd:v26.35.0 (cmd/standin-environmentd;
#    balancerd and console are stand-ins too). It is NOT Materialize: it
#    parses its command line, environment and listeners file as environmentd
#    26.35 does and refuses what that refuses, then runs its clusterd
#    replicas (stand-ins) as upstream's orchestrator does and answers the
#    operator's leader API, probes and client logins;
# 6. waits until the sample is UpToDate and prints how to look around.
#
# cert-manager (its controller, CRDs and ClusterIssuer orchestratord-local-ca)
# is built and installed only with RUN_CERT_MANAGER=1, as `make e2e` sets:
# the sample does not need it, and its first build is the longest here.
#
# Each step prints the time so far and an estimate of the time left: the
# steps' durations in the last complete run on this machine (kept in the
# cache), or, before any, estimates of a first run on 2 cores. A long step
# prints a progress line every RUN_PROGRESS seconds (default 60; on a
# terminal one line is redrawn every 5 seconds).
#
# `hack/cluster/cluster.sh down` stops the cluster. Runs as root (as
# cluster.sh). Settings: those of cluster.sh, RUN_TIMEOUT (seconds for
# each wait, default 300), RUN_CERT_MANAGER and RUN_PROGRESS.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cluster=$root/hack/cluster/cluster.sh
timeout=${RUN_TIMEOUT:-300}
release=orchestratord
ns=orchestratord
sample_ns=materialize-sample
service_cidr=${ORCHESTRATORD_CLUSTER_SERVICE_CIDR:-10.96.0.0/16}
dns_ip=${service_cidr%.*/*}.10   # as cluster.sh: the kubelet's clusterDNS
cert_manager=${RUN_CERT_MANAGER:-0}
cache_root=${ORCHESTRATORD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/orchestratord}
t0=$SECONDS

# On a terminal a log line first clears the progress line being redrawn.
log() {
  if [ -t 2 ]; then printf '\r\033[K' >&2; fi
  echo "run: [$(clock $((SECONDS - t0)))] $*" >&2
}

# clock SECONDS: 75 -> 1m15s.
clock() { if [ "$1" -ge 60 ]; then echo "$(($1 / 60))m$(printf %02d $(($1 % 60)))s"; else echo "${1}s"; fi; }

# The steps, in order, with what a first run on 2 cores is estimated to
# take in each, from the first runs in docs/benchmarks.md (the estimate
# before this machine has a record of its own).
all_steps=(build cluster load network-policies dns metrics-server cert-manager chart sample)
declare -A first_run=([build]=1050 [cluster]=60 [load]=30 [network-policies]=20 [dns]=10
  [metrics-server]=5 [cert-manager]=60 [chart]=60 [sample]=40)
steps=()
for name in "${all_steps[@]}"; do
  [ "$name" != cert-manager ] || [ "$cert_manager" = 1 ] || continue
  steps+=("$name")
done
record=$cache_root/run-steps
declare -A expected
for name in "${all_steps[@]}"; do expected[$name]=${first_run[$name]}; done
estimate_from="earlier first runs on 2 cores"
if [ -r "$record" ]; then
  while read -r name seconds; do
    if [ -n "${expected[$name]+set}" ] && [[ $seconds =~ ^[0-9]{1,6}$ ]]; then expected[$name]=$seconds; fi
  done <"$record"
  estimate_from="the last run here"
fi
declare -A took
current= current_since=0 progress_pid=
progress_file=$(mktemp)
cleanup() {
  [ -z "$progress_pid" ] || kill "$progress_pid" 2>/dev/null || true
  rm -f "$progress_file"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# left SECONDS-INTO-THE-CURRENT-STEP: the estimate of the time left.
left() {
  local name after=false sum=0 cur=${expected[$current]:-0}
  for name in "${steps[@]}"; do
    $after && sum=$((sum + expected[$name]))
    [ "$name" = "$current" ] && after=true
  done
  [ "$1" -lt "$cur" ] && sum=$((sum + cur - $1))
  echo "about $(( (sum + 59) / 60 )) min left"
}

# step NAME MESSAGE: ends the current step and starts the next, with the
# progress line of a long one.
step() {
  local now=$SECONDS i
  [ -z "$current" ] || took[$current]=$((now - current_since))
  current=$1 current_since=$now
  for i in "${!steps[@]}"; do [ "${steps[$i]}" = "$1" ] && break; done
  log "step $((i + 1))/${#steps[@]}: $2 ($(left 0), from $estimate_from)"
  echo "$current $current_since $((i + 1))" >"$progress_file"
  if [ -z "$progress_pid" ]; then
    progress &
    progress_pid=$!
  fi
}

# progress: the ticking line of the current step, until run.sh ends.
progress() {
  local every=${RUN_PROGRESS:-60} tty=false name since n line nap=
  [ -t 2 ] && tty=true every=5
  # Killed, it takes its sleep along: a sleep left behind would hold a
  # pipe on run.sh's stderr open after run.sh ended.
  trap 'kill $nap 2>/dev/null; exit 0' TERM
  while :; do
    sleep "$every" &
    nap=$!
    wait "$nap"
    # run.sh killed outright (no EXIT trap): stop too.
    kill -0 $$ 2>/dev/null || exit 0
    read -r name since n <"$progress_file" || continue
    current=$name
    line="run: [$(clock $((SECONDS - t0)))] step $n/${#steps[@]}: $name for $(clock $((SECONDS - since))), $(left $((SECONDS - since)))"
    if $tty; then printf '\r%s\033[K' "$line" >&2; else echo "$line" >&2; fi
  done
}

# finish: records the steps' durations, the next run's estimate (a step
# this run skipped keeps its last figure).
finish() {
  local name
  took[$current]=$((SECONDS - current_since))
  kill "$progress_pid" 2>/dev/null || true
  progress_pid=
  mkdir -p "$cache_root"
  for name in "${all_steps[@]}"; do
    if [ -n "${took[$name]+set}" ]; then echo "$name ${took[$name]}"; else echo "$name ${expected[$name]}"; fi
  done >"$record.tmp"
  mv "$record.tmp" "$record"
  log "done in $(clock $((SECONDS - t0)))"
}

step build "building the images, the cluster's binaries and Helm"
# One build at a time: two at once on 2 cores took twice as long
# (docs/benchmarks.md, "The end-to-end suite").
# Not a process substitution: a failed build must stop the run here.
images=$("$root/hack/images/images.sh")
mapfile -t tars <<<"$images"
"$cluster" build
helm="$("$root/hack/kube-binaries.sh" helm kubectl)/helm"

step cluster "starting the cluster"
"$cluster" up >&2
export KUBECONFIG
KUBECONFIG=$("$cluster" kubeconfig)
kubectl="$("$root/hack/kube-binaries.sh" kubectl)/kubectl"
k() { "$kubectl" "$@"; }

step load "loading ${#tars[@]} images"
"$cluster" load "${tars[@]}" >&2
# The chart's clusterd sizes select nodes labelled for swap
# (clusterd.swapNodeSelector), as on a real cluster whose nodes are labelled.
k label nodes --all --overwrite materialize.cloud/swap=true >&2

step network-policies "deploying the NetworkPolicy agent (kube-network-policies)"
k apply -f "$root/hack/cluster/network-policies/kube-network-policies.yaml" >&2
k -n kube-system rollout status ds/kube-network-policies --timeout "${timeout}s" >&2

step dns "deploying cluster DNS at $dns_ip"
sed "s/__DNS_IP__/$dns_ip/" "$root/hack/cluster/dns/coredns.yaml" | k apply -f - >&2
k -n kube-system rollout status deploy/coredns --timeout "${timeout}s" >&2

step metrics-server "deploying metrics-server (the resource metrics API)"
k apply --server-side --force-conflicts -f "$root/hack/cluster/metrics-server/metrics-server.yaml" >&2

if [ "$cert_manager" = 1 ]; then
  step cert-manager "installing cert-manager (its controller and CRDs; issuer orchestratord-local-ca)"
  cm_dir=$(cd "$root/hack/tools/cert-manager" && go mod download -json github.com/cert-manager/cert-manager | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  # The module's CRDs are Helm templates only in their labels: drop those.
  for crd in "$cm_dir"/deploy/crds/crd-*.yaml; do
    grep -v '{{' "$crd"
    echo ---
  done | k apply --server-side --force-conflicts -f - >&2
  for crd in certificates issuers clusterissuers certificaterequests; do
    k wait --for condition=established --timeout "${timeout}s" crd/$crd.cert-manager.io >&2
  done
  k apply --server-side --force-conflicts -f "$root/hack/cluster/cert-manager/cert-manager.yaml" >&2
  k -n cert-manager rollout status deploy/cert-manager --timeout "${timeout}s" >&2
fi

step chart "installing the chart"
upgrade=false
# Upstream's NetworkPolicies for the environments, enforced by the agent:
# egress on too (cidrs at their default, 0.0.0.0/0), as upstream's users need
# it: the internal policies alone limit environmentd's egress to its own
# environment's pods, cutting it off from the API server and DNS.
"$helm" status "$release" --namespace "$ns" >/dev/null 2>&1 && upgrade=true
"$helm" upgrade --install "$release" "$root/charts/orchestratord" \
  --namespace "$ns" --create-namespace \
  --set webhook.image.repository=localhost/orchestratord/webhook,webhook.image.tag=dev,webhook.image.pullPolicy=Never \
  --set controllers.image.repository=localhost/orchestratord/controllers,controllers.image.tag=dev,controllers.image.pullPolicy=Never \
  --set webhook.replicas=2 \
  --set environmentd.imagePullPolicy=Never \
  --set networkPolicies.enabled=true,networkPolicies.internal.enabled=true \
  --set networkPolicies.ingress.enabled=true,networkPolicies.egress.enabled=true \
  --set observability.podMetrics.enabled=true \
  --set-json 'environmentd.defaultResources={"requests":{"cpu":"50m","memory":"32Mi"},"limits":{"memory":"128Mi"}}' \
  --set-json 'balancerd.defaultResources={"requests":{"cpu":"20m","memory":"16Mi"},"limits":{"memory":"64Mi"}}' \
  --set-json 'console.defaultResources={"requests":{"cpu":"20m","memory":"16Mi"},"limits":{"memory":"64Mi"}}' \
  --set-json 'clusters.sizes.local={"workers":1,"scale":1,"cpu_exclusive":false,"cpu_limit":0.02,"credits_per_hour":"0.00","disk_limit":"0","memory_limit":"64MiB"}' \
  --set clusters.defaultSizes.default=local,clusters.defaultSizes.system=local,clusters.defaultSizes.probe=local \
  --set clusters.defaultSizes.support=local,clusters.defaultSizes.catalogServer=local,clusters.defaultSizes.analytics=local \
  --wait --timeout "${timeout}s" >&2
if $upgrade; then
  # The images keep their tag (dev) across builds: restart the pods so they
  # run what was just built.
  k -n "$ns" rollout restart deploy/"$release-webhook" deploy/"$release-controllers" >&2
  k -n "$ns" rollout status deploy/"$release-webhook" --timeout "${timeout}s" >&2
  k -n "$ns" rollout status deploy/"$release-controllers" --timeout "${timeout}s" >&2
fi

# metrics-server started long ago; it is Available once it has scraped the
# node once.
k -n kube-system rollout status deploy/metrics-server --timeout "${timeout}s" >&2
k wait --for condition=Available --timeout "${timeout}s" apiservice/v1beta1.metrics.k8s.io >&2

step sample "applying the sample Materialize (environmentd, balancerd and console are TEST STAND-INs)"
k create namespace "$sample_ns" --dry-run=client -o yaml | k apply -f - >&2
# The stand-in checks the license key (a JWT signed with its test key:
# test/fixture/license.jwt) and mz_system's password; it connects to
# neither URL.
k -n "$sample_ns" create secret generic sample-backend \
  --from-literal=metadata_backend_url=postgres://stand-in.invalid/metadata \
  --from-literal=persist_backend_url=s3://stand-in.invalid/persist \
  --from-file=license_key="$root/test/fixture/license.jwt" \
  --from-literal=external_login_password_mz_system=stand-in-mz-system-password \
  --dry-run=client -o yaml | k apply -f - >&2
manifest=$(cat <<EOM
apiVersion: materialize.cloud/v1
kind: Materialize
metadata:
  name: sample
  namespace: $sample_ns
  annotations:
    orchestratord.local/note: "environmentd is a TEST STAND-IN (cmd/standin-environmentd), not Materialize"
spec:
  environmentdImageRef: localhost/standin/environmentd:v26.35.0
  backendSecretName: sample-backend
  # environmentd system parameters (the e2e suite rolls the sample out
  # often): a new generation checks every second, not every 10 s, whether
  # its clusters caught up, and is ready to promote once they stayed caught
  # up for 2 s, not 10 minutes.
  environmentdExtraArgs:
    - --system-parameter-default=0dt_deployment_hydration_check_interval=1s
    - --system-parameter-default=with_0dt_caught_up_check_stability_period=2s
EOM
)
# retry COMMAND...: the webhook may still be writing its CA into the CRD, or
# (after a restart) its pods may show Ready before they serve again.
retry() {
  local deadline=$((SECONDS + timeout))
  until "$@"; do
    [ $SECONDS -lt $deadline ] || { log "gave up: $*"; return 1; }
    sleep 2
  done
}
apply_sample() { echo "$manifest" | k apply -f - >&2; }
if k -n "$sample_ns" get mzs/sample >/dev/null 2>&1; then
  # A sample from an earlier run: its status predates this start. Force a
  # new generation so that UpToDate below is earned on this cluster.
  log "the sample exists: forcing a rollout"
  retry apply_sample
  patch='{"spec":{"forceRollout":"'$(cat /proc/sys/kernel/random/uuid)'"}}'
  retry k -n "$sample_ns" patch mzs/sample --type merge -p "$patch" >&2
else
  retry apply_sample
fi

log "waiting for the sample to be UpToDate"
# UpToDate=True for the current spec (observedGeneration = generation).
uptodate() {
  local s
  s=$(k -n "$sample_ns" get mzs/sample -o jsonpath='{.metadata.generation} {.status.conditions[?(@.type=="UpToDate")].observedGeneration} {.status.conditions[?(@.type=="UpToDate")].status}' 2>/dev/null) || return 1
  set -- $s
  [ "${3:-}" = True ] && [ "$1" = "$2" ]
}
deadline=$((SECONDS + timeout))
until uptodate; do
  if [ $SECONDS -ge $deadline ]; then
    k -n "$sample_ns" get mzs/sample -o yaml >&2 || true
    k -n "$sample_ns" get all >&2 || true
    log "the sample did not become UpToDate; see: $kubectl -n $ns logs deploy/$release-controllers"
    exit 1
  fi
  sleep 1
done
# environmentd (the stand-in) creates its bootstrap replicas' clusterd
# StatefulSets itself, with its own ServiceAccount, after listing
# VpcEndpoints (proof that its ClusterRole, bound by the controllers, its
# name prefix and the CRD are right), then connects to their pods through
# the operator's NetworkPolicies and waits until they hydrate.
hydrated() {
  k -n "$sample_ns" logs -l materialize.cloud/app=environmentd --tail -1 2>/dev/null | grep -q '"cluster replicas hydrated"'
}
until hydrated; do
  if [ $SECONDS -ge $deadline ]; then
    k -n "$sample_ns" get statefulsets,pods -l app.kubernetes.io/name=clusterd >&2 || true
    k -n "$sample_ns" logs -l materialize.cloud/app=environmentd --tail 20 >&2 || true
    log "environmentd's clusterd replicas did not hydrate"
    exit 1
  fi
  sleep 1
done
k get vpce -A >&2
k -n "$sample_ns" get mzs,statefulsets,pods >&2
finish
cat <<EOM

The sample Materialize is UpToDate ($((SECONDS - t0))s). Its environmentd,
balancerd and console are TEST STAND-INs (cmd/standin-environmentd), not
Materialize.

  export KUBECONFIG=$KUBECONFIG
  alias kubectl=$kubectl
  kubectl get mzs -A                                  # served at v1 through the conversion webhook
  kubectl -n $sample_ns get mzs sample -o yaml
  kubectl -n $sample_ns get mzs,statefulsets,services,pods,balancers,consoles
  kubectl get vpce -A                                 # VpcEndpoints: environmentd lists them as it boots
  kubectl -n $sample_ns get statefulsets,pods -l app.kubernetes.io/name=clusterd   # made by environmentd, running clusterd
  kubectl -n $sample_ns logs -l materialize.cloud/app=environmentd    # its boot: catalog, VpcEndpoints, replicas
  kubectl -n $ns get pods,leases        # webhook and controllers; one Lease per reconciler
  kubectl get networkpolicies -A        # the operator's, enforced by kube-system/kube-network-policies
  kubectl -n $ns logs deploy/$release-controllers
  kubectl -n $sample_ns patch mzs sample --type merge -p '{"spec":{"forceRollout":"'\$(cat /proc/sys/kernel/random/uuid)'"}}'   # a new generation

  hack/cluster/cluster.sh status
  hack/cluster/cluster.sh down                        # stop everything
EOM
