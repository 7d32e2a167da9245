# shellcheck shell=bash
# The local cluster: one "node" network namespace holding etcd, the Kubernetes control
# plane, the node agent (pods as processes + load-balancer stand-in) and the suite.
#
#   host netns ─ (nothing of ours but the netns files under /run/netns)
#   <prefix>node   lo: 127.0.0.1        etcd :2379, kube-apiserver :6443, controller-manager,
#                  br0: 10.244.0.1/16   scheduler, nodeagent (log endpoint :10250), the suite
#                  lo also: Service ClusterIPs and LB addresses (10.96.0.0/16, 10.250.0.0/24), /32s
#   <prefix>podN   eth0: 10.244.x.y/16 (veth to br0), default via 10.244.0.1
#
# Private addresses exist only inside these namespaces. Every namespace name starts with
# the run's prefix (aecf<id>-), so `down` finds all of them, even after a crash.
#
# With CLUSTER_NODES=2 a second node joins (conformance/traffic):
#
#   <prefix>node   br0 10.244.0.1/16 ── veth n2 ══ up0 ── br0 10.244.128.1/16   <prefix>node2
#                  (pods 10.244.0.0/17, LB)                (pods 10.244.128.0/17, default via
#                                                            10.244.0.1; its own node agent,
#                                                            no load balancer)
#   <prefix>n2-podN  pods of node-2 (default via 10.244.0.1, where the Service addresses are)
#
# The two bridges are one L2 segment: every pod and node reaches every other directly.
#
# Expects: RUN_DIR, RUN_PREFIX, KUBE_BIN_DIR, ETCD_BIN_DIR, ECHO_BASIC_BIN_DIR,
# COREDNS_BIN_DIR, HARNESS_BIN_DIR, ENVOY_BIN, AETHER_EDGE_BIN; optional
# AETHER_EDGE_OCI_IMAGE (IMAGE=LAYOUT-DIR: the node agent runs IMAGE's containers from
# that OCI image layout instead of the host binary), CLUSTER_NODES (1 or 2, default 1),
# EDGE_TRAFFIC_BIN (the program of image aether-edge-traffic), EG_BIN (envoy-gateway, the
# program of image envoyproxy/gateway: benches/peer/k8s), CLUSTER_DNS (the pods'
# resolv.conf names this server, as the kubelet's --cluster-dns: benches/peer/k8s runs
# coredns behind that ClusterIP).

NODE_IP=10.244.0.1
POD_CIDR=10.244.0.0/16
SERVICE_CIDR=10.96.0.0/16
LB_POOL=10.250.0.0/24
NODE2_IP=10.244.128.1
CLUSTER_NODES=${CLUSTER_NODES:-1}

# The work of `run` happens in a subshell; if the main script was killed outright
# (SIGKILL, no teardown), the subshell stops at its next step instead of carrying on.
orphan_check() { if [ "$BASHPID" != "$$" ] && ! kill -0 "$$" 2>/dev/null; then exit 137; fi; }
say() {
  orphan_check
  printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2
}

node_netns() { echo "${RUN_PREFIX}node"; }
node2_netns() { echo "${RUN_PREFIX}node2"; }
in_node() { nsenter --net="/run/netns/$(node_netns)" -- "$@"; }
# kubectl in the node netns; requests time out, so a dead API server cannot hang a run
# (`wait` has its own --timeout).
kc() {
  local rt=--request-timeout=30s
  [ "${1:-}" = wait ] && rt=
  in_node "$KUBE_BIN_DIR/kubectl" --kubeconfig "$RUN_DIR/admin.kubeconfig" $rt "$@"
}

# start NAME CMD...: a background process in the node netns, logging to logs/NAME.log.
start() {
  local name=$1
  shift
  start_in "$(node_netns)" "$name" "$@"
}

# start_in NETNS NAME CMD...: the same in another namespace (node-2's).
start_in() {
  local ns=$1 name=$2
  shift 2
  # nsenter execs the program, so $! is the program's own pid.
  nsenter --net="/run/netns/$ns" -- "$@" >>"$RUN_DIR/logs/$name.log" 2>&1 &
  echo "$! $name" >>"$RUN_DIR/pids"
}

# The API server (again, after an outage: same flags, same etcd).
start_apiserver() {
  local pki="$RUN_DIR/pki"
  start kube-apiserver "$KUBE_BIN_DIR/kube-apiserver" \
    --etcd-servers=http://127.0.0.1:2379 --bind-address=0.0.0.0 --secure-port=6443 \
    --advertise-address="$NODE_IP" --service-cluster-ip-range="$SERVICE_CIDR" \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" --authorization-mode=RBAC --allow-privileged=true \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --kubelet-preferred-address-types=InternalIP --enable-priority-and-fairness=false \
    --profiling=false --v=1
}

# start_nodeagent NETNS NAME NODE-NAME NODE-IP STATE-DIR KUBECONFIG FLAGS...: a node's
# kubelet stand-in.
start_nodeagent() {
  local ns=$1 name=$2 node=$3 ip=$4 state=$5 kubeconfig=$6
  shift 6
  start_in "$ns" "$name" "$HARNESS_BIN_DIR/nodeagent" run --kubeconfig="$kubeconfig" \
    --node-name="$node" --node-ip="$ip" --pod-cidr="$POD_CIDR" --bridge=br0 \
    --state-dir="$state" --apiserver="$NODE_IP:6443" --echo-basic="$ECHO_BASIC_BIN_DIR/echo-basic" \
    --echo-basic-v2="$HARNESS_BIN_DIR/echo-basic-v2" \
    --coredns="$COREDNS_BIN_DIR/coredns" --envoy="$ENVOY_BIN" --aether-edge="$AETHER_EDGE_BIN" \
    ${EDGE_TRAFFIC_BIN:+--edge-traffic="$EDGE_TRAFFIC_BIN"} ${EG_BIN:+--envoy-gateway="$EG_BIN"} \
    ${CLUSTER_DNS:+--cluster-dns="$CLUSTER_DNS"} \
    ${AETHER_EDGE_OCI_IMAGE:+--oci-image="$AETHER_EDGE_OCI_IMAGE"} "$@"
}

gen_certs() {
  local d="$RUN_DIR/pki"
  mkdir -p "$d"
  (
    cd "$d" || exit 1
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
      -keyout ca.key -out ca.crt -subj "/CN=aether-edge-conformance-ca" 2>/dev/null
    leaf() { # name subject [sans]
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
      local ext="extendedKeyUsage=serverAuth,clientAuth"
      [ -n "${3:-}" ] && ext="$ext
subjectAltName=$3"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -out "$1.crt" \
        -extfile <(echo "$ext") 2>/dev/null
      rm -f "$1.csr"
    }
    leaf apiserver "/CN=kube-apiserver" \
      "IP:127.0.0.1,IP:$NODE_IP,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    leaf admin "/O=system:masters/CN=admin"
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
  local server=$1
  cat >"$RUN_DIR/admin.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://$server
    certificate-authority: $d/ca.crt
users:
- name: admin
  user:
    client-certificate: $d/admin.crt
    client-key: $d/admin.key
contexts:
- name: local
  context: {cluster: local, user: admin}
current-context: local
EOF
}

wait_for() { # description timeout-seconds command...
  local what=$1 timeout=$2 start=$SECONDS
  shift 2
  until "$@" >/dev/null 2>&1; do
    orphan_check
    if ((SECONDS - start > timeout)); then
      say "timed out after ${timeout}s waiting for $what"
      return 1
    fi
    sleep 0.5
  done
}

cluster_up() {
  mkdir -p "$RUN_DIR/logs" "$RUN_DIR/node"
  : >"$RUN_DIR/pids"
  local ns
  ns="$(node_netns)"
  say "network: node netns $ns (bridge br0 $NODE_IP, pods $POD_CIDR, services $SERVICE_CIDR, LB pool $LB_POOL)"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$ns" link add br0 type bridge
  ip -n "$ns" addr add "$NODE_IP/16" dev br0
  ip -n "$ns" link set br0 up

  gen_certs "127.0.0.1:6443"
  local pki="$RUN_DIR/pki"

  say "etcd $("$ETCD_BIN_DIR/etcd" --version | head -1 | awk '{print $3}')"
  start etcd "$ETCD_BIN_DIR/etcd" --name node-1 --data-dir "$RUN_DIR/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster node-1=http://127.0.0.1:2380 --unsafe-no-fsync --log-level warn

  say "kube-apiserver $("$KUBE_BIN_DIR/kube-apiserver" --version | awk '{print $2}')"
  start_apiserver
  wait_for "kube-apiserver /readyz" 120 kc get --raw /readyz

  say "kube-controller-manager, kube-scheduler"
  start kube-controller-manager "$KUBE_BIN_DIR/kube-controller-manager" \
    --kubeconfig="$RUN_DIR/admin.kubeconfig" --authentication-kubeconfig="$RUN_DIR/admin.kubeconfig" \
    --authorization-kubeconfig="$RUN_DIR/admin.kubeconfig" \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --controllers='*,-node-lifecycle-controller,-cloud-node-lifecycle-controller,-node-ipam-controller,-node-route-controller,-service-lb-controller' \
    --service-cluster-ip-range="$SERVICE_CIDR" --leader-elect=false --bind-address=127.0.0.1 \
    --secure-port=10257 --profiling=false --v=1
  start kube-scheduler "$KUBE_BIN_DIR/kube-scheduler" \
    --kubeconfig="$RUN_DIR/admin.kubeconfig" --authentication-kubeconfig="$RUN_DIR/admin.kubeconfig" \
    --authorization-kubeconfig="$RUN_DIR/admin.kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port=10259 --profiling=false --v=1

  say "node agent (pods as processes, load-balancer stand-in)"
  local range=()
  [ "$CLUSTER_NODES" -gt 1 ] && range=(--pod-range=10.244.0.0/17)
  start_nodeagent "$ns" nodeagent node-1 "$NODE_IP" "$RUN_DIR/node" "$RUN_DIR/admin.kubeconfig" --netns-prefix="$RUN_PREFIX" \
    --lb-pool="$LB_POOL" --lb-interface=lo "${range[@]}"
  wait_for "node-1 Ready" 60 node_ready node-1
  if [ "$CLUSTER_NODES" -gt 1 ]; then node2_up; fi
  wait_for "default ServiceAccount" 60 kc get serviceaccount default -n default
  say "cluster up: kubeconfig $RUN_DIR/admin.kubeconfig (use it inside the node netns: nsenter --net=/run/netns/$ns)"
}

node_ready() {
  [ "$(kc get node "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

# The second node: its netns joined to node-1's bridge, its own node agent (no load
# balancer: one cluster, one), pods from 10.244.128.0/17.
node2_up() {
  local ns
  ns="$(node2_netns)"
  say "node-2: netns $ns (br0 $NODE2_IP, pods 10.244.128.0/17, bridged to node-1's br0)"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$ns" link add br0 type bridge
  ip -n "$ns" addr add "$NODE2_IP/16" dev br0
  ip -n "$ns" link set br0 up
  ip -n "$(node_netns)" link add n2 type veth peer name up0 netns "$ns"
  ip -n "$(node_netns)" link set n2 master br0 up
  ip -n "$ns" link set up0 master br0 up
  # Service and load-balancer addresses live on node-1 (as the stand-in's forwarders do).
  ip -n "$ns" route add default via "$NODE_IP"
  mkdir -p "$RUN_DIR/node2"
  # The API server as node-2 reaches it: node-1's address (its certificate names it).
  sed "s#server: https://127.0.0.1:6443#server: https://$NODE_IP:6443#" "$RUN_DIR/admin.kubeconfig" >"$RUN_DIR/node2.kubeconfig"
  start_nodeagent "$ns" nodeagent2 node-2 "$NODE2_IP" "$RUN_DIR/node2" "$RUN_DIR/node2.kubeconfig" --netns-prefix="${RUN_PREFIX}n2-" \
    --pod-range=10.244.128.0/17 --pod-gateway="$NODE_IP" --load-balancer=false
  wait_for "node-2 Ready" 60 node_ready node-2
}

# cluster_down RUN_DIR PREFIX: stop everything of one run and delete its namespaces.
# Safe to call more than once and on a half-built cluster.
cluster_down() {
  local dir=$1 prefix=$2 ns pid name
  # The node agent first, gently: it stops its pods and removes their namespaces.
  if [ -f "$dir/pids" ]; then
    while read -r pid name; do
      case "$name" in nodeagent*) kill -TERM "$pid" 2>/dev/null || true ;; esac
    done <"$dir/pids"
    for _ in $(seq 1 40); do
      pgrep -f "nodeagent run .*--state-dir=$dir/node" >/dev/null || break
      sleep 0.25
    done
    tac "$dir/pids" | while read -r pid name; do kill -TERM "$pid" 2>/dev/null || true; done
  fi
  # Then whatever still runs in any of the run's namespaces.
  local inodes=""
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$prefix" || true); do
    inodes="$inodes $(stat -L -c %i "/run/netns/$ns" 2>/dev/null || true)"
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null || true; done
  done
  sleep 0.5
  for _ in $(seq 1 20); do
    local left=""
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$prefix" || true); do
      left="$left$(ip netns pids "$ns" 2>/dev/null)"
    done
    [ -z "$left" ] && break
    sleep 0.25
  done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$prefix" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$prefix" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
  echo "$inodes" >"$dir/netns-inodes" 2>/dev/null || true
  # Mount targets the node agent had to create on the host, deepest first, only if empty.
  if ls "$dir"/node*/created-paths >/dev/null 2>&1; then
    cat "$dir"/node*/created-paths | awk '{print length, $0}' | sort -rn | cut -d' ' -f2- | uniq | while read -r p; do
      if [ -d "$p" ]; then rmdir "$p" 2>/dev/null || true; elif [ -f "$p" ] && [ ! -s "$p" ]; then rm -f "$p"; fi
    done
  fi
}

# cluster_check_clean RUN_DIR PREFIX: prints what is left over; fails if anything is.
cluster_check_clean() {
  local dir=$1 prefix=$2 bad=0 ino p
  if ip netns list 2>/dev/null | grep -q "^$prefix"; then
    say "LEFTOVER netns: $(ip netns list | grep "^$prefix" | tr '\n' ' ')"
    bad=1
  fi
  if grep -q "$prefix" /proc/self/mountinfo; then
    say "LEFTOVER mounts: $(grep "$prefix" /proc/self/mountinfo | awk '{print $5}' | tr '\n' ' ')"
    bad=1
  fi
  if ip -o link show 2>/dev/null | grep -q "$prefix"; then
    say "LEFTOVER links in the host netns"
    bad=1
  fi
  # Processes: any still holding one of the run's (now deleted) network namespaces, or
  # naming the run directory on their command line.
  # shellcheck disable=SC2013  # the file holds words (inode numbers), not lines
  for ino in $(cat "$dir/netns-inodes" 2>/dev/null); do
    for p in /proc/[0-9]*; do
      if [ "$(stat -L -c %i "$p/ns/net" 2>/dev/null)" = "$ino" ]; then
        say "LEFTOVER process ${p#/proc/} in the run's network namespace: $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)"
        bad=1
      fi
    done
  done
  # (not counting this script and its ancestors: `down RUN_DIR` names the dir itself)
  local ancestors=" " a=$BASHPID left=""
  while [ -n "$a" ] && [ "$a" != 0 ]; do
    ancestors="$ancestors$a "
    a="$(awk '{print $4}' "/proc/$a/stat" 2>/dev/null)"
  done
  for p in $(pgrep -f -- "$dir"); do
    case "$ancestors" in *" $p "*) ;; *) left="$left $p" ;; esac
  done
  if [ -n "$left" ]; then
    say "LEFTOVER processes naming $dir:$left"
    bad=1
  fi
  if ls "$dir"/node*/created-paths >/dev/null 2>&1; then
    while read -r p; do
      if [ -e "$p" ]; then say "LEFTOVER path $p"; bad=1; fi
    done < <(cat "$dir"/node*/created-paths)
  fi
  return $bad
}
