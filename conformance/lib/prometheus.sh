# shellcheck shell=bash
# `conformance/run --prometheus`: a real Prometheus scrapes the edge of the cluster,
# and every query of deploy/grafana/aether-edge.json must return data there.
#
#   prometheus_start (once GatewayClass aether is Accepted, before the suite):
#     targets = the ready endpoints of Service aether-edge-metrics (the chart's and
#     deploy/'s headless Service), port `metrics` (the agent's /metrics) and port
#     `envoy-stats` (Envoy's /stats/prometheus), one of each per edge pod; and the
#     /metrics of each controller pod (its pod IP, container port `metrics`: the
#     leader's convergence series and status writes come from there);
#     static_configs, scrape every 1 s, Prometheus on 127.0.0.1:19090 in the node netns.
#   prometheus_check (after the suite, cluster still up):
#     a Gateway + HTTPRoute of class aether (namespace prometheus-check) so that the
#     per-Gateway series and the convergence/status histograms have something to show
#     in the window, whatever the suite left; then promcheck: every target up, every
#     dashboard query ($__rate_interval = 1m) with data, a table query → series.
#
# Needs: in_node, kc, start, wait_for, say (lib/cluster.sh); PROMETHEUS_BIN_DIR,
# HARNESS_BIN_DIR, RUN_DIR, repo.

prometheus_addr=127.0.0.1:19090
prometheus_targets=0

# metrics_endpoints PORTNAME: host:port of each ready endpoint of aether-edge-metrics.
metrics_endpoints() {
  local port
  port="$(kc -n aether-ingress get endpointslices -l kubernetes.io/service-name=aether-edge-metrics \
    -o jsonpath="{.items[0].ports[?(@.name==\"$1\")].port}")"
  [ -n "$port" ] || return 1
  kc -n aether-ingress get endpointslices -l kubernetes.io/service-name=aether-edge-metrics \
    -o jsonpath='{range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{"\n"}{end}' |
    sort -u | sed "s/\$/:$port/"
}

# controller_endpoints: podIP:port of /metrics of each controller pod with an IP.
controller_endpoints() {
  kc -n aether-ingress get pods -l app.kubernetes.io/name=aether-edge-controller \
    -o jsonpath='{range .items[?(@.status.podIP)]}{.status.podIP}:{.spec.containers[0].ports[?(@.name=="metrics")].containerPort}{"\n"}{end}' |
    { grep -v ':$' || true; } | sort -u
}

controller_endpoints_ready() { [ -n "$(controller_endpoints)" ]; }

# Every edge pod the DaemonSet wants is a ready endpoint of the metrics Service.
metrics_endpoints_ready() {
  local want have
  want="$(kc -n aether-ingress get daemonset aether-edge -o jsonpath='{.status.desiredNumberScheduled}')"
  have="$(metrics_endpoints metrics | grep -c . || true)"
  [ -n "$want" ] && [ "$want" -gt 0 ] && [ "$have" = "$want" ]
}

prometheus_start() {
  local dir="$RUN_DIR/prometheus" agents envoys
  wait_for "every edge pod ready behind Service aether-edge-metrics" 180 metrics_endpoints_ready || return 1
  wait_for "a controller pod with an IP" 180 controller_endpoints_ready || return 1
  agents="$(metrics_endpoints metrics; controller_endpoints)"
  envoys="$(metrics_endpoints envoy-stats)"
  [ -n "$envoys" ] || { say "Service aether-edge-metrics has no envoy-stats port"; return 1; }
  prometheus_targets=$(($(grep -c . <<<"$agents") + $(grep -c . <<<"$envoys")))
  mkdir -p "$dir/data"
  {
    echo "global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}"
    echo "scrape_configs:"
    echo "  - job_name: aether-edge"
    echo "    static_configs: [{targets: [$(paste -sd, <<<"$agents")]}]"
    echo "  - job_name: envoy"
    echo "    metrics_path: /stats/prometheus"
    echo "    static_configs: [{targets: [$(paste -sd, <<<"$envoys")]}]"
  } >"$dir/prometheus.yml"
  say "prometheus: $("$PROMETHEUS_BIN_DIR/prometheus" --version 2>&1 | head -1)"
  say "prometheus: scraping every 1s agents $(paste -sd' ' <<<"$agents") and Envoys $(paste -sd' ' <<<"$envoys") (config: $dir/prometheus.yml)"
  start prometheus "$PROMETHEUS_BIN_DIR/prometheus" --config.file="$dir/prometheus.yml" \
    --storage.tsdb.path="$dir/data" --web.listen-address="$prometheus_addr" --log.level=warn
  wait_for "Prometheus ready on $prometheus_addr" 60 in_node curl -fsS "http://$prometheus_addr/-/ready" || return 1
}

prometheus_fixture_programmed() {
  [ "$(kc -n prometheus-check get gateway metrics -o 'jsonpath={.status.conditions[?(@.type=="Programmed")].status}')" = True ]
}

prometheus_check() {
  say "prometheus: a Gateway and an HTTPRoute of class aether in namespace prometheus-check, then every query of deploy/grafana/aether-edge.json"
  kc apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Namespace
metadata: {name: prometheus-check}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: metrics, namespace: prometheus-check}
spec:
  gatewayClassName: aether
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: metrics, namespace: prometheus-check}
spec:
  parentRefs: [{name: metrics}]
  rules: [{matches: [{path: {type: PathPrefix, value: /}}]}]
EOF
  wait_for "Gateway prometheus-check/metrics Programmed" 120 prometheus_fixture_programmed || return 1
  sleep 3 # a few scrapes after the events of that change (1 s interval)
  in_node "$HARNESS_BIN_DIR/promcheck" --prometheus="http://$prometheus_addr" \
    --dashboard="$repo/deploy/grafana/aether-edge.json" --rate-interval=1m \
    --targets="$prometheus_targets" --min-scrapes=5 --wait=2m
}
