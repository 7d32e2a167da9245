//! Ports two Gateways cannot share.
//!
//! Standalone and in static address mode, every Gateway's listeners bind on
//! the Envoy's own addresses, so two Gateways with a listener on port 80 of
//! one address ask Envoy for one socket twice. Envoy refuses the second
//! listener (and, in one response with many, blamed the wrong ones: 50
//! Gateways on one port ended 1 Programmed, 45 Invalid and 4 Pending for good).
//! Decided here instead: the oldest Gateway (creationTimestamp, then
//! namespace/name) keeps the port; on every younger one, each listener on it
//! is `Accepted=False/PortUnavailable`, naming the Gateway that holds it.
//!
//! ```text
//!  infra/a (older)  :80 127.0.0.1  ── claims it
//!  infra/b          :80 127.0.0.1  ── taken: {(80, TCP): (127.0.0.1, infra/a)}
//!  infra/c          :80 0.0.0.0    ── taken too (an unspecified address binds every one)
//!  infra/d          :53/UDP        ── its own: UDP 53 is not TCP 53
//! ```
//!
//! In service address mode every Gateway gets Envoy ports of its own, so
//! nothing is shared ([`crate::Config::shared_ports`]).

use crate::Config;
use aether_ir::ObjectRef;
use gateway_api::apis::experimental::gateways::Gateway;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

/// A listener socket's kind: TCP 53 and UDP 53 are two sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Transport {
    Tcp,
    Udp,
}

/// What a Gateway lost: per (port, transport), the address and the older
/// Gateway holding it.
pub type Taken = BTreeMap<(u16, Transport), (String, ObjectRef)>;

/// The ports each Gateway lost to an older one (only Gateways that lost any).
pub fn taken(
    gateways: &[(&ObjectRef, &Arc<Gateway>)],
    config: &Config,
) -> BTreeMap<ObjectRef, Taken> {
    let mut lost = BTreeMap::new();
    if !config.shared_ports || gateways.len() < 2 {
        return lost;
    }
    let mut by_age: Vec<&(&ObjectRef, &Arc<Gateway>)> = gateways.iter().collect();
    // Those with a creationTimestamp first (oldest first), then by key.
    let age = |g: &Gateway| {
        let created = g.metadata.creation_timestamp.as_ref().map(|t| t.0);
        (created.is_none(), created)
    };
    by_age.sort_by(|a, b| age(a.1).cmp(&age(b.1)).then_with(|| a.0.cmp(b.0)));
    let mut held: BTreeMap<(u16, Transport), Vec<(String, ObjectRef)>> = BTreeMap::new();
    for (key, gw) in by_age {
        let Ok(addresses) = addresses(gw, config) else {
            continue;
        };
        let mut mine: Taken = BTreeMap::new();
        let mut claims = Vec::new();
        for l in &gw.spec.listeners {
            let Some(socket) = socket(l.port, &l.protocol) else {
                continue;
            };
            let holder = held.get(&socket).and_then(|owners| {
                owners
                    .iter()
                    .find(|(at, _)| addresses.iter().any(|a| overlap(a, at)))
            });
            match holder {
                Some((at, owner)) => {
                    mine.insert(socket, (at.clone(), owner.clone()));
                }
                None => claims.push(socket),
            }
        }
        for socket in claims {
            let owners = held.entry(socket).or_default();
            for a in &addresses {
                owners.push((a.clone(), (*key).clone()));
            }
        }
        if !mine.is_empty() {
            lost.insert((*key).clone(), mine);
        }
    }
    lost
}

/// The socket a listener asks for; `None` for a port or protocol never bound.
fn socket(port: i32, protocol: &str) -> Option<(u16, Transport)> {
    let port = u16::try_from(port).ok().filter(|p| *p > 0)?;
    let transport = match protocol {
        "UDP" => Transport::Udp,
        "HTTP" | "HTTPS" | "TLS" | "TCP" => Transport::Tcp,
        _ => return None,
    };
    Some((port, transport))
}

/// Two bind addresses share a socket: the same one, or either unspecified.
fn overlap(a: &str, b: &str) -> bool {
    let unspecified = |s: &str| s.parse::<IpAddr>().is_ok_and(|ip| ip.is_unspecified());
    a == b || unspecified(a) || unspecified(b)
}

/// spec.addresses of type IPAddress (or no type), else the configured default.
/// An IPAddress without a value asks for any address (GatewayAddressEmpty):
/// the configured default here, the load balancer's in service mode.
pub fn addresses(gw: &Gateway, config: &Config) -> Result<Vec<String>, String> {
    let spec = gw.spec.addresses.as_deref().unwrap_or_default();
    let mut out = Vec::new();
    for a in spec {
        let ty = a.r#type.as_deref().unwrap_or("IPAddress");
        if ty != "IPAddress" {
            return Err(format!(
                "address type {ty} is not supported (only IPAddress)"
            ));
        }
        let Some(value) = a.value.as_deref().filter(|v| !v.is_empty()) else {
            out.push(config.default_address.clone());
            continue;
        };
        let ip: IpAddr = value
            .parse()
            .map_err(|_| format!("address {value:?} is not an IP address"))?;
        out.push(ip.to_string());
    }
    if out.is_empty() {
        out.push(config.default_address.clone());
    }
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gateway(
        name: &str,
        created: Option<&str>,
        listeners: &[(i32, &str)],
        address: Option<&str>,
    ) -> (ObjectRef, Arc<Gateway>) {
        let listeners: String = listeners
            .iter()
            .enumerate()
            .map(|(i, (port, protocol))| {
                format!("  - {{name: l{i}, port: {port}, protocol: {protocol}}}\n")
            })
            .collect();
        let created = created.map_or(String::new(), |c| format!(", creationTimestamp: \"{c}\""));
        let addresses = address.map_or(String::new(), |a| {
            format!("  addresses: [{{type: IPAddress, value: \"{a}\"}}]\n")
        });
        let yaml = format!(
            "metadata: {{name: {name}, namespace: infra{created}}}\nspec:\n  gatewayClassName: aether\n{addresses}  listeners:\n{listeners}"
        );
        (
            ObjectRef::new("infra", name),
            Arc::new(serde_norway::from_str(&yaml).unwrap()),
        )
    }

    fn lost(
        gws: &[(ObjectRef, Arc<Gateway>)],
        config: &Config,
    ) -> Vec<(String, Vec<(u16, String)>)> {
        let refs: Vec<(&ObjectRef, &Arc<Gateway>)> = gws.iter().map(|(k, g)| (k, g)).collect();
        taken(&refs, config)
            .into_iter()
            .map(|(k, t)| {
                (
                    k.name,
                    t.into_iter()
                        .map(|((p, _), (_, by))| (p, by.name))
                        .collect(),
                )
            })
            .collect()
    }

    #[test]
    fn the_older_gateway_keeps_a_shared_port() {
        let config = Config::default();
        let gws = [
            gateway("b", None, &[(80, "HTTP"), (443, "HTTPS")], None),
            gateway("a", None, &[(80, "HTTP")], None),
            gateway("z", Some("2020-01-01T00:00:00Z"), &[(443, "TLS")], None),
            gateway("any", None, &[(80, "HTTP")], Some("0.0.0.0")),
            gateway("other-ip", None, &[(80, "HTTP")], Some("10.0.0.1")),
            gateway("dns", None, &[(53, "UDP"), (53, "TCP")], None),
            gateway("dns-tcp", None, &[(53, "TCP"), (54, "UDP")], None),
        ];
        assert_eq!(
            lost(&gws, &config),
            [
                ("any".to_string(), vec![(80, "a".to_string())]),
                (
                    "b".to_string(),
                    vec![(80, "a".to_string()), (443, "z".to_string())]
                ),
                ("dns-tcp".to_string(), vec![(53, "dns".to_string())]),
            ]
        );
        let own = Config {
            shared_ports: false,
            ..Config::default()
        };
        assert!(
            lost(&gws, &own).is_empty(),
            "service mode: every Gateway has its own ports"
        );
    }
}
