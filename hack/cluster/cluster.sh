#!/usr/bin/env bash
# A real single-node Kubernetes on this machine, without Docker: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
# kube-proxy (iptables mode) over containerd + runc with a CNI bridge.
#
#   hack/cluster/cluster.sh up          start (or finish starting) the cluster
#   hack/cluster/cluster.sh build       only build what `up` runs (no root needed)
#   hack/cluster/cluster.sh down        stop it and leave the machine as found
#   hack/cluster/cluster.sh status      processes, health and `kubectl get nodes`
#   hack/cluster/cluster.sh kubeconfig  print the admin kubeconfig's path
#   hack/cluster/cluster.sh audit-log   print the API server's audit log's path
#   hack/cluster/cluster.sh restart NAME...  stop components (etcd, kube-apiserver,
#                                       ...) gracefully, then start them again
#   hack/cluster/cluster.sh kill NAME...  SIGKILL components (a crash: no
#                                       shutdown, no flush), then start them again
#                                       (restart and kill: DOWN_FOR=SECONDS keeps
#                                       them down that long first, an outage)
#   hack/cluster/cluster.sh load TAR... import OCI/Docker image tarballs
#   hack/cluster/cluster.sh purge       down, then delete the state directory
#
# Runs as root. The first `up` installs runc, the CNI plugins, iptables,
# conntrack and socat from Debian when missing and builds the Kubernetes
# binaries (hack/kube-binaries.sh), containerd (hack/tools/containerd) and a
# pause image (hack/cluster/pause) into caches outside the work tree; later
# runs reuse them. Cluster state (PKI, kubeconfigs, etcd, containerd, kubelet,
# logs, pid files) lives in $ORCHESTRATORD_CLUSTER_DIR (default
# ~/.cache/orchestratord/cluster) and survives `down`; `purge` removes it.
#
# Network rule: traffic goes only to loopback and to the cluster's own
# addresses (pod CIDR, service CIDR, node IP). Pods are not masqueraded, have
# no default route, and an iptables chain (ORCHD-CLUSTER-EGRESS) drops any pod
# packet for another address; the service CIDR is routed into a device that
# discards packets, so a ClusterIP without a kube-proxy rule goes nowhere.
# The API server refuses hostNetwork pods, whose traffic would not pass the
# bridge, but one: the NetworkPolicy agent (ServiceAccount
# kube-system/kube-network-policies, deployed by run.sh), which talks only to
# the API server and programs the nftables table "inet kube-network-policies";
# `down` deletes that table. Pods resolve through the cluster DNS IP (inside
# the service CIDR, with no server behind it) and never see the host's
# resolv.conf.
#
# Settings (environment):
#   ORCHESTRATORD_CLUSTER_DIR           state directory
#   ORCHESTRATORD_CACHE                 binary cache root (as hack/kube-binaries.sh)
#   ORCHESTRATORD_CLUSTER_NODE_IP       node address (default 192.0.2.2, documentation range)
#   ORCHESTRATORD_CLUSTER_POD_CIDR      cluster CIDR (default 10.244.0.0/16)
#   ORCHESTRATORD_CLUSTER_SERVICE_CIDR  service CIDR (default 10.96.0.0/16)
#   ORCHESTRATORD_CLUSTER_TIMEOUT       seconds to wait for the node to be Ready (default 180)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
work=${ORCHESTRATORD_CLUSTER_DIR:-$HOME/.cache/orchestratord/cluster}
cache_root=${ORCHESTRATORD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/orchestratord}
node_ip=${ORCHESTRATORD_CLUSTER_NODE_IP:-192.0.2.2}
pod_cidr=${ORCHESTRATORD_CLUSTER_POD_CIDR:-10.244.0.0/16}
service_cidr=${ORCHESTRATORD_CLUSTER_SERVICE_CIDR:-10.96.0.0/16}
ready_timeout=${ORCHESTRATORD_CLUSTER_TIMEOUT:-180}
node_name=orchestratord-node
net_name=orchestratord
bridge=orchd-cni0
node_dev=orchd-node0
chain=ORCHD-CLUSTER-EGRESS
cni_bin_dir=/usr/lib/cni
pause_ref=localhost/orchestratord/pause:v1
# The NetworkPolicy agent (hack/cluster/network-policies): its ServiceAccount
# and nftables table.
netpol_sa=kube-network-policies
netpol_table="inet kube-network-policies"

# First three octets + .1 / .10 of the service CIDR: the kubernetes Service
# and the cluster DNS address.
svc_prefix=${service_cidr%.*/*}
api_service_ip=$svc_prefix.1
dns_ip=$svc_prefix.10

pki=$work/pki
run=$work/run
logs=$work/logs
ctrd=$work/containerd
sock=$ctrd/containerd.sock
kubelet_root=$work/kubelet
admin_kubeconfig=$work/admin.kubeconfig

# Sysctls that the kubelet, kube-proxy or the bridge plugin may change; saved
# on the first `up`, restored by `down`.
sysctls=(
  kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes
  vm.overcommit_memory vm.panic_on_oom
  net.ipv4.ip_forward net.ipv4.conf.all.route_localnet
  net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
  net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established
  net.netfilter.nf_conntrack_tcp_timeout_close_wait
)
# Host paths outside the state directory that the components create when
# missing; `down` removes those that did not exist before the first `up`.
# (The kubelet's device-plugin socket has a fixed path.) Children first.
host_dirs=(/var/lib/cni/results /var/lib/cni /var/log/containers /run/containerd
  /var/lib/kubelet/device-plugins /var/lib/kubelet)

log() { echo "cluster: $*" >&2; }
die() { log "$*"; exit 1; }

# ---------------------------------------------------------------- processes

# A pid file holds "PID STARTTIME"; the start time (field 22 of
# /proc/PID/stat) guards against a recycled PID.
start_time() { awk '{sub(/.*\) /, ""); print $20}' "/proc/$1/stat" 2>/dev/null; }

# Prints the PID recorded for $1 if that process is still alive.
running_pid() {
  local f=$run/$1.pid pid st
  [ -f "$f" ] || return 1
  read -r pid st <"$f" || return 1
  [ -n "$pid" ] && [ "$(start_time "$pid")" = "$st" ] || return 1
  echo "$pid"
}

# start NAME BINARY ARGS...: start a component in its own session with its
# log in $logs/NAME.log, unless it is already running.
start() {
  local name=$1; shift
  if pid=$(running_pid "$name"); then
    log "$name already running (pid $pid)"
    return
  fi
  # fds 8 and 9 hold this script's locks: the component must not inherit them.
  (cd "$work" && exec setsid "$@" </dev/null >>"$logs/$name.log" 2>&1 8>&- 9>&-) &
  local pid=$!
  echo "$pid $(start_time "$pid")" >"$run/$name.pid"
  log "started $name (pid $pid, log $logs/$name.log)"
}

# stop SECONDS NAME...: SIGTERM the recorded processes, wait for them to
# exit, and SIGKILL those still running after SECONDS.
stop() {
  local wait=$1 name pid deadline left; shift
  for name in "$@"; do
    if pid=$(running_pid "$name"); then
      log "stopping $name (pid $pid)"
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  deadline=$((SECONDS + wait))
  while :; do
    left=()
    for name in "$@"; do running_pid "$name" >/dev/null && left+=("$name"); done
    [ ${#left[@]} -gt 0 ] || break
    if [ $SECONDS -ge $deadline ]; then
      for name in "${left[@]}"; do
        pid=$(running_pid "$name") || continue
        log "$name did not stop in ${wait}s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
      done
    fi
    sleep 0.1
  done
  for name in "$@"; do rm -f "$run/$name.pid"; done
}

# wait_for WHAT SECONDS COMMAND...: retry COMMAND until it succeeds.
wait_for() {
  local what=$1 deadline=$((SECONDS + $2)); shift 2
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      log "timed out waiting for $what"
      return 1
    fi
    sleep 0.2
  done
}

# put FILE [MODE]: write stdin to FILE only if its content changes (kube-proxy
# exits when its configuration file changes).
put() {
  local tmp=$1.tmp
  cat >"$tmp"
  [ -z "${2:-}" ] || chmod "$2" "$tmp"
  if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv "$tmp" "$1"; fi
}

# ------------------------------------------------------------------ building

ensure_packages() {
  local missing=()
  command -v runc >/dev/null || missing+=(runc)
  [ -x $cni_bin_dir/bridge ] && [ -x $cni_bin_dir/host-local ] || missing+=(containernetworking-plugins)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v socat >/dev/null || missing+=(socat)
  command -v openssl >/dev/null || missing+=(openssl)
  command -v curl >/dev/null || missing+=(curl)
  command -v ip >/dev/null || missing+=(iproute2)
  [ ${#missing[@]} -eq 0 ] && return
  log "installing ${missing[*]} from Debian"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# Builds containerd, ctr and the runc shim pinned in hack/tools/containerd
# into a cache keyed by version and the tools module's go.mod and go.sum, once.
build_containerd() {
  local mod=$root/hack/tools/containerd version dir pkg=github.com/containerd/containerd/v2
  version=$(awk -v p=$pkg '$1 == p {print $2; exit}' "$mod/go.mod")
  # And by the module's go.mod and go.sum: a change of a dependency
  # (hack/align-modules) rebuilds it.
  dir=$cache_root/containerd-$version-$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-8)
  mkdir -p "$dir"
  exec 8>"$dir/.lock"
  flock 8
  if [ ! -x "$dir/containerd" ] || [ ! -x "$dir/ctr" ] || [ ! -x "$dir/containerd-shim-runc-v2" ]; then
    log "building containerd $version into $dir (first time only, about 2 minutes)"
    (cd "$mod" && CGO_ENABLED=0 go build -trimpath -tags 'no_btrfs no_devmapper no_zfs' \
      -ldflags "-s -w -X $pkg/version.Version=$version -X $pkg/version.Revision=$version" \
      -o "$dir/.tmp/" $pkg/cmd/containerd $pkg/cmd/ctr $pkg/cmd/containerd-shim-runc-v2)
    mv "$dir/.tmp/"* "$dir/" && rmdir "$dir/.tmp"
  fi
  exec 8>&-
  echo "$dir"
}

# Builds the pause binary and packs it into an OCI image tarball, cached by
# the hash of the sources that make it.
build_pause_image() {
  local hash dir
  hash=$(cat "$root/hack/cluster/pause/main.go" "$root/hack/cluster/image/main.go" "$root/go.sum" | sha256sum | cut -c1-16)
  dir=$cache_root/cluster-images
  mkdir -p "$dir"
  exec 8>"$dir/.lock"
  flock 8
  if [ ! -f "$dir/pause-$hash.tar" ]; then
    log "building the pause image (first time only)"
    (cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$dir/pause-$hash" ./hack/cluster/pause &&
      go run ./hack/cluster/image -ref $pause_ref -file "/pause=$dir/pause-$hash" \
        -user 65535:65535 -out "$dir/pause-$hash.tar")
    rm -f "$dir/pause-$hash"
  fi
  exec 8>&-
  echo "$dir/pause-$hash.tar"
}

# ----------------------------------------------------------------------- PKI

# cert NAME CN O SANS USAGE: a key and a certificate signed by the cluster CA.
cert() {
  local name=$1 cn=$2 o=$3 sans=$4 usage=$5 subj
  [ -f "$pki/$name.crt" ] && openssl x509 -checkend 86400 -noout -in "$pki/$name.crt" >/dev/null && return
  subj="/CN=$cn"
  [ -z "$o" ] || subj="/O=$o$subj"
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/$name.key" 2>/dev/null
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [ -z "$sans" ] || echo "subjectAltName=$sans"
  } >"$pki/$name.ext"
  openssl req -new -key "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr" 2>/dev/null
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>/dev/null
  rm -f "$pki/$name.csr" "$pki/$name.ext"
}

# kubeconfig NAME CERT: a kubeconfig with embedded credentials.
kubeconfig() {
  local c=$2
  put "$work/$1.kubeconfig" 600 <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $net_name
  cluster:
    server: https://$node_ip:6443
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: $1
  user:
    client-certificate-data: $(base64 -w0 "$pki/$c.crt")
    client-key-data: $(base64 -w0 "$pki/$c.key")
contexts:
- name: $net_name
  context: {cluster: $net_name, user: $1}
current-context: $net_name
EOF
}

make_pki() {
  mkdir -p "$pki"
  chmod 700 "$pki"
  if [ ! -f "$pki/ca.crt" ]; then
    log "generating the cluster PKI in $pki"
    openssl ecparam -name prime256v1 -genkey -noout -out "$pki/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=orchestratord-local-ca" -days 3650 -sha256 \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
      -out "$pki/ca.crt" 2>/dev/null
  fi
  [ -f "$pki/sa.key" ] || {
    openssl ecparam -name prime256v1 -genkey -noout -out "$pki/sa.key" 2>/dev/null
    openssl ec -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  }
  local api_sans="DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  api_sans+=",DNS:localhost,IP:127.0.0.1,IP:$node_ip,IP:$api_service_ip"
  cert apiserver kube-apiserver "" "$api_sans" serverAuth
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters "" clientAuth
  cert front-proxy-client front-proxy-client "" "" clientAuth
  cert admin kubernetes-admin system:masters "" clientAuth
  cert controller-manager system:kube-controller-manager "" "" clientAuth
  cert scheduler system:kube-scheduler "" "" clientAuth
  cert kube-proxy system:kube-proxy "" "" clientAuth
  cert kubelet-client "system:node:$node_name" system:nodes "" clientAuth
  cert kubelet-serving "system:node:$node_name" system:nodes "DNS:$node_name,DNS:localhost,IP:$node_ip,IP:127.0.0.1" serverAuth
  kubeconfig admin admin
  kubeconfig controller-manager controller-manager
  kubeconfig scheduler scheduler
  kubeconfig kube-proxy kube-proxy
  kubeconfig kubelet kubelet-client
}

# ------------------------------------------------------------------- configs

write_configs() {
  mkdir -p "$work/config" "$work/cni/net.d" "$work/cni/networks" "$kubelet_root" "$work/pod-logs" "$ctrd"
  put "$work/config/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
EOF
  # Pods resolve through the cluster DNS address only.
  echo "nameserver $dns_ip" | put "$work/config/resolv.conf"

  # containerd writes the CNI config from this template once the kubelet
  # passes on the node's pod CIDR. No default route: pods reach only the
  # cluster's ranges; no ipMasq.
  put "$work/config/cni.conflist.tmpl" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$net_name",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$work/cni/networks",
        "ranges": [[{"subnet": "{{.PodCIDR}}"}]],
        "routes": [{"dst": "$pod_cidr"}, {"dst": "$service_cidr"}, {"dst": "$node_ip/32"}]
      }
    }
  ]
}
EOF

  put "$work/config/containerd.toml" <<EOF
version = 3
root = "$ctrd/root"
state = "$ctrd/state"

[grpc]
  address = "$sock"

[ttrpc]
  address = "$sock.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = "$ctrd/opt"
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
  [plugins.'io.containerd.shim.v1.manager']
    socket_dir = "$(shim_socket_dir)"
  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "$pause_ref"
  [plugins.'io.containerd.cri.v1.runtime']
    restrict_oom_score_adj = true
    disable_apparmor = true
    netns_mounts_under_state_dir = true
    cdi_spec_dirs = []
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          SystemdCgroup = false
          BinaryName = "$(command -v runc)"
          Root = "$ctrd/runc"
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["$cni_bin_dir"]
      conf_dir = "$work/cni/net.d"
      conf_template = "$work/config/cni.conflist.tmpl"
      use_internal_loopback = true
EOF

  put "$work/config/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$pki/ca.crt"}
authorization: {mode: Webhook}
tlsCertFile: "$pki/kubelet-serving.crt"
tlsPrivateKeyFile: "$pki/kubelet-serving.key"
containerRuntimeEndpoint: "unix://$sock"
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDNS: ["$dns_ip"]
clusterDomain: cluster.local
resolvConf: "$work/config/resolv.conf"
podLogsDir: "$work/pod-logs"
rotateCertificates: false
serverTLSBootstrap: false
# Imported images cannot be pulled again: never garbage-collect them, and
# do not evict on a nearly full disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
EOF

  put "$work/config/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$work/kube-proxy.kubeconfig"}
hostnameOverride: $node_name
mode: iptables
clusterCIDR: $pod_cidr
bindAddress: $node_ip
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$node_ip/32"]
# Leave the host's conntrack and route_localnet sysctls alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false, masqueradeAll: false}
EOF
}

# Shim sockets must sit in a short directory (containerd allows 42 bytes).
shim_socket_dir() {
  local d=$work/s
  [ ${#d} -le 42 ] || d=/run/orchd-$(echo "$work" | sha256sum | cut -c1-8)
  echo "$d"
}

# ------------------------------------------------------------------- network

# Records which host paths and nftables tables existed before the first up.
record_host_state() {
  [ -f "$run/host-state" ] && return
  {
    for d in "${host_dirs[@]}"; do [ -e "$d" ] && echo "dir $d"; done
    nft list tables 2>/dev/null | sed 's/^table /nft /' || true
  } >"$run/host-state.tmp"
  mv "$run/host-state.tmp" "$run/host-state"
}

save_sysctls() {
  [ -f "$run/sysctls" ] && return
  local k
  for k in "${sysctls[@]}"; do
    sysctl -n "$k" >/dev/null 2>&1 && echo "$k=$(sysctl -n "$k" | tr '\t' ' ')"
  done >"$run/sysctls.tmp"
  mv "$run/sysctls.tmp" "$run/sysctls"
}

restore_sysctls() {
  [ -f "$run/sysctls" ] || return 0
  local line
  while IFS= read -r line; do
    sysctl -q -w "${line%%=*}=${line#*=}" >/dev/null || log "could not restore $line"
  done <"$run/sysctls"
  rm -f "$run/sysctls"
}

# The node address on a device of its own (dummy, or ifb where the kernel
# has no dummy driver), the CNI bridge (without IPv6), the service CIDR routed
# into the node device (which discards what it is sent), and the egress
# chain.
setup_network() {
  if ! ip link show "$node_dev" >/dev/null 2>&1; then
    ip link add "$node_dev" type dummy 2>/dev/null || ip link add "$node_dev" type ifb
  fi
  sysctl -q -w "net.ipv6.conf.$node_dev.disable_ipv6=1" >/dev/null 2>&1 || true
  ip addr replace "$node_ip/32" dev "$node_dev"
  ip link set "$node_dev" up
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
  fi
  sysctl -q -w "net.ipv6.conf.$bridge.disable_ipv6=1" >/dev/null 2>&1 || true
  ip link set "$bridge" up
  ip route replace "$service_cidr" dev "$node_dev"
  # bridged pod traffic must pass iptables (kube-proxy, the egress chain).
  sysctl -q -w net.bridge.bridge-nf-call-iptables=1 >/dev/null
  sysctl -q -w net.bridge.bridge-nf-call-ip6tables=1 >/dev/null

  iptables -w -N $chain 2>/dev/null || iptables -w -F $chain
  iptables -w -A $chain -d "$pod_cidr" -j RETURN
  iptables -w -A $chain -d "$service_cidr" -j RETURN
  iptables -w -A $chain -d "$node_ip/32" -j RETURN
  iptables -w -A $chain -j DROP
  iptables -w -t raw -N $chain 2>/dev/null || iptables -w -t raw -F $chain
  iptables -w -t raw -A $chain -d "$pod_cidr" -j RETURN
  iptables -w -t raw -A $chain -d "$service_cidr" -j RETURN
  iptables -w -t raw -A $chain -d "$node_ip/32" -j RETURN
  iptables -w -t raw -A $chain -j DROP
  local hook
  for hook in FORWARD INPUT; do
    iptables -w -C $hook -s "$pod_cidr" -j $chain 2>/dev/null || iptables -w -I $hook 1 -s "$pod_cidr" -j $chain
  done
  iptables -w -t raw -C PREROUTING -s "$pod_cidr" -j $chain 2>/dev/null ||
    iptables -w -t raw -I PREROUTING 1 -s "$pod_cidr" -j $chain
  # Pods have no IPv6 address; drop any IPv6 they send off the bridge.
  ip6tables -w -N $chain 2>/dev/null || ip6tables -w -F $chain
  ip6tables -w -A $chain -j DROP
  for hook in FORWARD INPUT; do
    ip6tables -w -C $hook -i "$bridge" -j $chain 2>/dev/null || ip6tables -w -I $hook 1 -i "$bridge" -j $chain
  done
}

# Deletes every rule that jumps to a KUBE-* chain (kube-proxy's, the
# kubelet's) or to ours, then those chains, in every table of both families.
clean_iptables() {
  local cmd table rule c
  for cmd in iptables ip6tables; do
    command -v $cmd >/dev/null || continue
    for table in raw mangle nat filter security; do
      $cmd -w -t $table -S >/dev/null 2>&1 || continue
      while IFS= read -r rule; do
        eval "$cmd -w -t $table -D ${rule#-A }" 2>/dev/null || true
      done < <($cmd -w -t $table -S | grep -E '^-A ' | grep -E -- "-j (KUBE-|$chain)" | grep -vE "^-A (KUBE-|$chain)" || true)
      for c in $($cmd -w -t $table -S | awk '$1 == "-N" && ($2 ~ /^KUBE-/ || $2 == "'$chain'") {print $2}'); do
        $cmd -w -t $table -F "$c" 2>/dev/null || true
      done
      for c in $($cmd -w -t $table -S | awk '$1 == "-N" && ($2 ~ /^KUBE-/ || $2 == "'$chain'") {print $2}'); do
        $cmd -w -t $table -X "$c" 2>/dev/null || true
      done
    done
  done
}

# Deletes the NetworkPolicy agent's table (rules that queue pod packets to a
# listener that is gone) unless it existed before the first up. The agent
# deletes it only on SIGINT; `down` SIGKILLs it with the other containers.
clean_netpol_table() {
  command -v nft >/dev/null || return 0
  ! grep -qx "nft $netpol_table" "$run/host-state" 2>/dev/null || return 0
  nft list table $netpol_table >/dev/null 2>&1 || return 0
  nft delete table $netpol_table || log "could not delete the nftables table $netpol_table"
}

# Removes nftables tables that did not exist before the first up and hold no
# rules any more (the iptables-nft tables that iptables created).
clean_nft_tables() {
  command -v nft >/dev/null && [ -f "$run/host-state" ] || return 0
  local family name
  nft list tables 2>/dev/null | while read -r _ family name; do
    grep -qx "nft $family $name" "$run/host-state" 2>/dev/null && continue
    # A table without rules lists only table and chain lines with handles.
    if ! nft -a list table "$family" "$name" 2>/dev/null | grep '# handle' | grep -qvE '^\s*(table|chain) '; then
      nft delete table "$family" "$name" 2>/dev/null || true
    fi
  done
}

# ----------------------------------------------------------------------- up

# node_ready KUBECTL SINCE: the node reports Ready in a heartbeat at or
# after SINCE (an RFC 3339 UTC time, compared as a string).
node_ready() {
  local out
  out=$("$1" --kubeconfig "$admin_kubeconfig" get node "$node_name" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}') || return 1
  [ "${out%% *}" = True ] && [[ ! "${out#* }" < "$2" ]]
}

build_kube() {
  "$root/hack/kube-binaries.sh" etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl
}

# cmd_build builds what cmd_up runs and starts nothing: run.sh's build step,
# timed apart from the start.
cmd_build() {
  build_kube >/dev/null
  build_containerd >/dev/null
  build_pause_image >/dev/null
}

cmd_up() {
  [ "$(id -u)" = 0 ] || die "must run as root"
  mkdir -p "$work" "$run" "$logs"
  exec 9>"$work/.lock"
  flock 9
  ensure_packages

  local bins ctrd_bin pause_tar t0=$SECONDS
  bins=$(build_kube)
  ctrd_bin=$(build_containerd)
  pause_tar=$(build_pause_image)
  mkdir -p "$work/bin"
  ln -sfn "$bins/kubectl" "$work/bin/kubectl"
  ln -sfn "$ctrd_bin/ctr" "$work/bin/ctr"
  echo "$bins" >"$run/kube-bin-dir"
  echo "$ctrd_bin" >"$run/containerd-bin-dir"

  record_host_state
  save_sysctls
  make_pki
  write_configs
  setup_network
  mkdir -p "$(shim_socket_dir)"

  start etcd "$bins/etcd" --name "$node_name" --data-dir "$work/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster "$node_name=http://127.0.0.1:2380" --listen-metrics-urls http://127.0.0.1:2381 \
    --log-level warn
  wait_for etcd 60 curl -fsS http://127.0.0.1:2379/health

  start kube-apiserver "$bins/kube-apiserver" \
    --etcd-servers http://127.0.0.1:2379 \
    --bind-address "$node_ip" --advertise-address "$node_ip" --secure-port 6443 \
    --service-cluster-ip-range "$service_cidr" --allow-privileged=true \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" \
    --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$pki/ca.crt" \
    --kubelet-preferred-address-types InternalIP,Hostname \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction,OwnerReferencesPermissionEnforcement \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --requestheader-client-ca-file "$pki/ca.crt" --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --proxy-client-cert-file "$pki/front-proxy-client.crt" --proxy-client-key-file "$pki/front-proxy-client.key" \
    --audit-policy-file "$work/config/audit-policy.yaml" --audit-log-path "$logs/audit.log" \
    --audit-log-maxsize 100 --audit-log-maxbackup 1 \
    --profiling=false
  wait_for kube-apiserver 90 "$bins/kubectl" --kubeconfig "$admin_kubeconfig" get --raw /readyz
  refuse_host_network "$bins/kubectl"

  start kube-controller-manager "$bins/kube-controller-manager" \
    --kubeconfig "$work/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$work/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$work/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false \
    --allocate-node-cidrs=true --cluster-cidr "$pod_cidr" --node-cidr-mask-size 24 \
    --service-cluster-ip-range "$service_cidr" \
    --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
    --root-ca-file "$pki/ca.crt" --service-account-private-key-file "$pki/sa.key" \
    --use-service-account-credentials=true --profiling=false
  start kube-scheduler "$bins/kube-scheduler" \
    --kubeconfig "$work/scheduler.kubeconfig" \
    --authentication-kubeconfig "$work/scheduler.kubeconfig" \
    --authorization-kubeconfig "$work/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --profiling=false

  # containerd starts its shims (containerd-shim-runc-v2) from PATH.
  PATH=$ctrd_bin:$PATH start containerd "$ctrd_bin/containerd" --config "$work/config/containerd.toml"
  wait_for containerd 60 "$ctrd_bin/ctr" --address "$sock" version
  "$ctrd_bin/ctr" --address "$sock" -n k8s.io images import --snapshotter overlayfs "$pause_tar" >>"$logs/ctr.log" 2>&1 ||
    die "importing the pause image failed: see $logs/ctr.log"

  # After a restart the node object still says Ready from before: only a
  # heartbeat newer than this start counts.
  running_pid kubelet >/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ >"$run/kubelet.started"
  start kubelet "$bins/kubelet" \
    --config "$work/config/kubelet.yaml" --kubeconfig "$work/kubelet.kubeconfig" \
    --root-dir "$kubelet_root" --hostname-override "$node_name" --node-ip "$node_ip"
  start kube-proxy "$bins/kube-proxy" --config "$work/config/kube-proxy.yaml"

  if ! wait_for "node $node_name to be Ready" "$ready_timeout" node_ready "$bins/kubectl" "$(cat "$run/kubelet.started")"; then
    cmd_status || true
    die "the node did not become Ready; logs are in $logs"
  fi
  log "up in $((SECONDS - t0))s"
  cat <<EOF
Cluster up: node $node_name ($node_ip), pods $pod_cidr, services $service_cidr, DNS $dns_ip (no server).
  export KUBECONFIG=$admin_kubeconfig
  export PATH=$work/bin:\$PATH    # kubectl, ctr (ctr --address $sock -n k8s.io ...)
  hack/cluster/cluster.sh load IMAGE.tar   # import an image; pods use imagePullPolicy: Never or IfNotPresent
  sandbox image: $pause_ref
EOF
}

# refuse_host_network KUBECTL: a pod in the host's network namespace would
# bypass the bridge and the egress DROP chain, so the API server refuses such
# pods (a ValidatingAdmissionPolicy; namespace labels cannot lift it). The
# one exception is the NetworkPolicy agent, which must program the node's
# nftables: a pod in kube-system (the cluster's own namespace) running as its
# ServiceAccount.
refuse_host_network() {
  "$1" --kubeconfig "$admin_kubeconfig" apply --server-side --field-manager orchestratord-cluster -f - >>"$logs/kubectl.log" 2>&1 <<EOF ||
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: orchestratord-cluster-no-host-network
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [pods]
  validations:
  - expression: >-
      !has(object.spec.hostNetwork) || !object.spec.hostNetwork ||
      (request.namespace == 'kube-system' && has(object.spec.serviceAccountName) &&
      object.spec.serviceAccountName == '$netpol_sa')
    message: "this local cluster refuses hostNetwork pods: their traffic would bypass its egress rule"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: orchestratord-cluster-no-host-network
spec:
  policyName: orchestratord-cluster-no-host-network
  validationActions: [Deny]
EOF
    die "installing the hostNetwork policy failed: see $logs/kubectl.log"
}

# --------------------------------------------------------------------- down

ctr_cmd() { "$(cat "$run/containerd-bin-dir")/ctr" --address "$sock" "$@"; }

# Kills every container through containerd, then deletes tasks and
# containers, while containerd still runs.
kill_containers() {
  running_pid containerd >/dev/null || return 0
  local ns id ids i
  for ns in $(ctr_cmd namespaces ls -q 2>/dev/null || true); do
    for id in $(ctr_cmd -n "$ns" tasks ls -q 2>/dev/null || true); do
      ctr_cmd -n "$ns" tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1 &
    done
    wait
    for ((i = 0; i < 100; i++)); do
      ctr_cmd -n "$ns" tasks ls 2>/dev/null | awk 'NR > 1 && $3 != "STOPPED"' | grep -q . || break
      sleep 0.1
    done
    ids=$(ctr_cmd -n "$ns" tasks ls -q 2>/dev/null || true)
    [ -z "$ids" ] || ctr_cmd -n "$ns" tasks delete -f $ids >/dev/null 2>&1 || true
    ids=$(ctr_cmd -n "$ns" sandboxes ls 2>/dev/null | awk 'NR > 1 {print $1}' || true)
    [ -z "$ids" ] || ctr_cmd -n "$ns" sandboxes rm -f $ids >/dev/null 2>&1 || true
    ids=$(ctr_cmd -n "$ns" containers ls -q 2>/dev/null || true)
    [ -z "$ids" ] || ctr_cmd -n "$ns" containers delete $ids >/dev/null 2>&1 || true
  done
}

# Kills whatever is left in the kubelet's cgroups (PIDs the kernel
# recorded) and the shims that containerd recorded, then removes the
# cgroups.
clean_processes_and_cgroups() {
  local f pid d
  for f in "$ctrd"/state/io.containerd.runtime.v2.task/*/*/shim.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    [ -n "$pid" ] && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(cat "$run/containerd-bin-dir")/containerd-shim-runc-v2" ] &&
      kill -KILL "$pid" 2>/dev/null || true
  done
  for d in /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods; do
    [ -d "$d" ] || continue
    for f in $(find "$d" -name cgroup.procs); do
      for pid in $(cat "$f" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    done
  done
  for d in /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods; do
    [ -d "$d" ] || continue
    for ((i = 0; i < 50; i++)); do
      find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [ -d "$d" ] || break
      sleep 0.1
    done
    [ ! -d "$d" ] || log "could not remove cgroup $d"
  done
}

# Unmounts everything mounted under the state directory (kubelet volumes,
# container root filesystems, sandbox shm, network namespaces), deepest
# first.
unmount_all() {
  local m
  for m in $(awk -v w="$work" '{gsub(/\\040/, " ", $5); if ($5 == w || index($5, w "/") == 1) print $5}' /proc/self/mountinfo | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
  done
}

clean_network() {
  local veth
  for veth in $(ip -o link show master "$bridge" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    ip link del "$veth" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
  ip route del "$service_cidr" dev "$node_dev" 2>/dev/null || true
  ip link del "$node_dev" 2>/dev/null || true
  clean_iptables
  clean_netpol_table
  clean_nft_tables
  command -v conntrack >/dev/null && conntrack -D -s "$pod_cidr" >/dev/null 2>&1 || true
  command -v conntrack >/dev/null && conntrack -D -d "$pod_cidr" >/dev/null 2>&1 || true
  # CNI result caches of this network, IPAM allocations.
  rm -f /var/lib/cni/results/"$net_name"-* 2>/dev/null || true
  rm -rf "$work/cni/networks" "$work/cni/net.d"
}

remove_created_host_dirs() {
  local d
  [ -f "$run/host-state" ] || return 0
  # Container log links of this cluster's pods.
  find /var/log/containers -maxdepth 1 -type l -lname "$work/*" -delete 2>/dev/null || true
  for d in "${host_dirs[@]}"; do
    grep -qx "dir $d" "$run/host-state" && continue
    [ "$d" != /var/lib/kubelet/device-plugins ] || rm -f "$d/kubelet.sock"
    rmdir "$d" 2>/dev/null || true
  done
  local s
  s=$(shim_socket_dir)
  rm -rf "$s"
  rm -f "$run/host-state"
}

cmd_down() {
  [ "$(id -u)" = 0 ] || die "must run as root"
  if [ -d "$work" ]; then
    mkdir -p "$run"
    exec 9>"$work/.lock"
    flock 9
  fi
  local t0=$SECONDS
  stop 30 kubelet
  kill_containers
  stop 30 kube-proxy kube-scheduler kube-controller-manager
  stop 60 kube-apiserver
  stop 30 etcd containerd
  clean_processes_and_cgroups
  unmount_all
  # kube-proxy's own cleanup (iptables, ipvs and nftables rules), then a
  # sweep for anything left.
  local bins
  bins=$(cat "$run/kube-bin-dir" 2>/dev/null || true)
  if [ -n "$bins" ] && [ -x "$bins/kube-proxy" ]; then
    timeout 60 "$bins/kube-proxy" --cleanup >"$logs/kube-proxy-cleanup.log" 2>&1 || true
  fi
  clean_network
  restore_sysctls
  remove_created_host_dirs
  log "down in $((SECONDS - t0))s"
}

cmd_purge() {
  cmd_down
  log "removing $work"
  rm -rf "$work"
}

# ------------------------------------------------------------------- status

cmd_status() {
  local name pid rc=0 health
  printf '%-24s %-8s %s\n' COMPONENT PID HEALTH
  for name in etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy; do
    if pid=$(running_pid $name); then
      case $name in
        etcd) health=$(curl -fsS http://127.0.0.1:2379/health 2>&1 | tr -d '\n') ;;
        kube-apiserver) health=$(curl -sS --cacert "$pki/ca.crt" "https://$node_ip:6443/readyz" 2>&1) ;;
        kube-controller-manager) health=$(curl -sSk https://127.0.0.1:10257/healthz 2>&1) ;;
        kube-scheduler) health=$(curl -sSk https://127.0.0.1:10259/healthz 2>&1) ;;
        containerd) health=$(ctr_cmd version 2>&1 | awk '/Server:/ {s=1} s && /Version:/ {print "server " $2; exit}') ;;
        kubelet) health=$(curl -sS http://127.0.0.1:10248/healthz 2>&1) ;;
        kube-proxy) health=$(curl -sS -o /dev/null -w '%{http_code}' http://127.0.0.1:10256/healthz 2>&1) ;;
      esac
    else
      pid=- health="not running"
      rc=1
    fi
    printf '%-24s %-8s %s\n' "$name" "$pid" "${health:0:80}"
  done
  if running_pid kube-apiserver >/dev/null; then
    echo
    "$(cat "$run/kube-bin-dir")/kubectl" --kubeconfig "$admin_kubeconfig" get nodes -o wide || rc=1
  fi
  echo
  echo "KUBECONFIG=$admin_kubeconfig"
  return $rc
}

# A component restarted on its own, as a node's supervisor would after an
# upgrade or a crash: the chaos tests restart etcd and kube-apiserver with
# the operator running.
# cmd_restart SECONDS NAME...: stop (SIGKILL after SECONDS; 0 is a crash)
# and start the named components again.
cmd_restart() {
  [ "$(id -u)" = 0 ] || die "must run as root"
  local wait=$1; shift
  [ $# -gt 0 ] || die "usage: cluster.sh restart|kill NAME..."
  local name
  for name in "$@"; do
    case $name in
      etcd | kube-apiserver | kube-controller-manager | kube-scheduler | containerd | kubelet | kube-proxy) ;;
      *) die "restart: unknown component $name" ;;
    esac
  done
  exec 9>"$work/.lock"
  flock 9
  if [ "$wait" = 0 ]; then
    local pid
    for name in "$@"; do
      if pid=$(running_pid "$name"); then
        log "killing $name (pid $pid)"
        kill -KILL "$pid" 2>/dev/null || true
      fi
    done
  fi
  stop "$wait" "$@"
  sleep "${DOWN_FOR:-0}"
  cmd_up
}

cmd_load() {
  [ $# -gt 0 ] || die "usage: cluster.sh load IMAGE.tar..."
  running_pid containerd >/dev/null || die "containerd is not running: cluster.sh up first"
  local t
  for t in "$@"; do
    ctr_cmd -n k8s.io images import --snapshotter overlayfs "$t"
  done
}

case ${1:-} in
  up) cmd_up ;;
  build) cmd_build ;;
  down) cmd_down ;;
  purge) cmd_purge ;;
  status) cmd_status ;;
  kubeconfig) echo "$admin_kubeconfig" ;;
  audit-log) echo "$logs/audit.log" ;;
  restart) shift; cmd_restart 30 "$@" ;;
  kill) shift; cmd_restart 0 "$@" ;;
  load) shift; cmd_load "$@" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac
