//! Inputs for the benchmark drivers: Gateway API YAML at a chosen scale.

use aether_ir::ObjectRef;
use aether_xds::{Resource, ResourceType, Snapshot};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// A snapshot of `gateways` Gateways `namespace/gw-<g>`, each made of one
/// resource of every type of `types`, named `<type>-gw-<g>`, whose encoded
/// body is `body(type, name, g)`.
pub fn gateways_snapshot(
    gateways: usize,
    namespace: &str,
    types: &[ResourceType],
    body: impl Fn(ResourceType, &str, usize) -> Vec<u8>,
) -> Snapshot {
    let mut resources: BTreeMap<ResourceType, BTreeMap<String, Resource>> = BTreeMap::new();
    let mut members = BTreeMap::new();
    for g in 0..gateways {
        let mut mine = BTreeSet::new();
        for &ty in types {
            let name = format!("{}-gw-{g}", ty.short_name());
            let encoded = body(ty, &name, g);
            resources
                .entry(ty)
                .or_default()
                .insert(name.clone(), Resource::new(&name, ty.type_url(), encoded));
            mine.insert((ty, name));
        }
        members.insert(ObjectRef::new(namespace, format!("gw-{g}")), mine);
    }
    Snapshot::new(resources, members)
}

/// `gateways` Gateways (one HTTP listener each, on port 10000+i) and `routes`
/// HTTPRoutes spread round-robin over them, each with a hostname, two rules and
/// its own backend Service + EndpointSlice.
pub fn scale_yaml(gateways: usize, routes: usize) -> String {
    let mut y = String::from(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: aether}\nspec: {controllerName: gateway.aether.io/edge}\n",
    );
    for g in 0..gateways {
        let _ = write!(
            y,
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw-{g}, namespace: default}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: {port}}}\n",
            port = 10000 + g
        );
    }
    for r in 0..routes {
        let g = r % gateways;
        let _ = write!(
            y,
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: route-{r}, namespace: default}}\nspec:\n  parentRefs: [{{name: gw-{g}}}]\n  hostnames: [\"host-{h}.example.com\"]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /r{r}}}}}]\n    backendRefs: [{{name: svc-{r}, port: 80}}]\n  - matches: [{{path: {{type: Exact, value: /r{r}/exact}}, headers: [{{name: x-route, value: \"{r}\"}}]}}]\n    filters:\n    - type: RequestHeaderModifier\n      requestHeaderModifier: {{set: [{{name: x-bench, value: \"{r}\"}}]}}\n    backendRefs: [{{name: svc-{r}, port: 80}}]\n",
            h = r % 50
        );
        let _ = write!(
            y,
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: svc-{r}, namespace: default}}\nspec:\n  ports: [{{name: http, port: 80, targetPort: 8080}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: svc-{r}-1, namespace: default, labels: {{kubernetes.io/service-name: svc-{r}}}}}\naddressType: IPv4\nports: [{{name: http, port: 8080}}]\nendpoints:\n- addresses: [\"127.0.{a}.{b}\"]\n  conditions: {{ready: true}}\n",
            a = (r / 250) % 250 + 1,
            b = r % 250 + 1
        );
    }
    y
}

/// Peak resident set size of this process so far, in bytes (Linux `VmHWM`).
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The median and the 99th percentile (nearest rank) of `samples`.
/// One row of the table `make bench` prints (`benches/run` collects these
/// lines from every driver): the driver, what it measured, the number, and the
/// target it answers to (`-` where there is none).
pub fn summary(bench: &str, what: &str, value: impl std::fmt::Display, target: &str) {
    println!("summary | {bench} | {what} | {value} | {target} |");
}

pub fn median_p99(samples: &mut [f64]) -> (f64, f64) {
    samples.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| {
        let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
        samples[rank - 1]
    };
    (at(0.5), at(0.99))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let mut s: Vec<f64> = (1..=100).map(f64::from).collect();
        s.reverse();
        assert_eq!(median_p99(&mut s), (50.0, 99.0));
    }

    #[test]
    fn scale_yaml_parses_into_the_requested_objects() {
        let mut store = aether_gateway::Store::default();
        let n = store.add_yaml("scale.yaml", &scale_yaml(3, 10)).unwrap();
        // 1 class + 3 gateways + 10 × (route, service, slice)
        assert_eq!(n, 1 + 3 + 30);
    }
}
