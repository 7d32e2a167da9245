//! Kubernetes service mode with a TCP and a UDP listener on one port (53): the
//! Gateway's Service has `p-53` (TCP) and `p-53-udp` (UDP) targeting one Envoy
//! port, and the local Envoy binds both sockets there — a TCP echo answers through
//! the TCPRoute and a UDP echo through the UDPRoute, both on the targetPort.

use crate::support::*;
use gateway_api::apis::standard::tcproutes::TcpRoute;
use gateway_api::apis::standard::udproutes::UdpRoute;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::Duration;

const NS: &str = "app";

#[test]
fn tcp_and_udp_on_one_port_are_served_on_one_allocated_port() {
    in_netns(async {
        let w = given_dns_echoes_behind_a_gateway_in_service_mode().await;
        let port = both_protocols_get_a_service_port_on_one_target_port(&w).await;
        both_routes_are_accepted(&w).await;
        tcp_and_udp_answer_on_that_port(port);
    });
}

/// Fields drop in order: the API server last.
struct World {
    client: kube::Client,
    _agent: KubeAgent,
    _envoy: Envoy,
    _server: aether_testkit::ApiServer,
}

/// Service `dns` (TCP 53 and UDP 53) with its endpoints, the Gateway and both routes.
fn app_yaml(tcp: u16, udp: u16) -> String {
    [
        base_yaml(&[NS]),
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: dns, namespace: {NS}}}\nspec:\n  ports:\n  - {{name: tcp, port: 53, protocol: TCP, targetPort: {tcp}}}\n  - {{name: udp, port: 53, protocol: UDP, targetPort: {udp}}}\n"
        ),
        format!(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: dns-1\n  namespace: {NS}\n  labels: {{kubernetes.io/service-name: dns}}\naddressType: IPv4\nports:\n- {{name: tcp, port: {tcp}, protocol: TCP}}\n- {{name: udp, port: {udp}, protocol: UDP}}\nendpoints:\n- addresses: [\"{POD_IP}\"]\n  conditions: {{ready: true}}\n"
        ),
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: dns-tcp, protocol: TCP, port: 53}}\n  - {{name: dns-udp, protocol: UDP, port: 53}}\n"
        ),
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: TCPRoute\nmetadata: {{name: t, namespace: {NS}}}\nspec:\n  parentRefs: [{{name: gw, sectionName: dns-tcp}}]\n  rules:\n  - backendRefs: [{{name: dns, port: 53}}]\n"
        ),
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: UDPRoute\nmetadata: {{name: u, namespace: {NS}}}\nspec:\n  parentRefs: [{{name: gw, sectionName: dns-udp}}]\n  rules:\n  - backendRefs: [{{name: dns, port: 53}}]\n"
        ),
    ]
    .join("---\n")
}

async fn given_dns_echoes_behind_a_gateway_in_service_mode() -> World {
    let logs = temp_dir("kube-service-l4");
    let server = aether_testkit::ApiServer::start().await;
    server
        .apply(&app_yaml(tcp_echo(POD_IP, "tcp"), udp_echo(POD_IP, "udp")))
        .await
        .unwrap();
    let flags = ["--leader-elect=false", "--address-mode", "service"];
    let agent = kube_agent(server.kubeconfig_path(), &flags, &logs);
    let envoy = envoy("node-a", &agent.xds, true, &logs);
    World {
        client: server.client(),
        _agent: agent,
        _envoy: envoy,
        _server: server,
    }
}

/// `p-53` (TCP) and `p-53-udp` (UDP) targeting one Envoy port; returns it.
async fn both_protocols_get_a_service_port_on_one_target_port(w: &World) -> u16 {
    let got = service_ports(&edge_service(&w.client).await);
    let target = got[0].3;
    assert_eq!(
        got,
        vec![
            ("p-53".into(), 53, "TCP".into(), target),
            ("p-53-udp".into(), 53, "UDP".into(), target),
        ]
    );
    u16::try_from(target).unwrap()
}

/// Written only once Envoy ACKed both listeners.
async fn both_routes_are_accepted(w: &World) {
    let c = &w.client;
    eventually(
        Duration::from_secs(30),
        "both routes accepted",
        || async move {
            let t = get_json::<TcpRoute>(c, Some(NS), "t").await.ok_or("no t")?;
            let u = get_json::<UdpRoute>(c, Some(NS), "u").await.ok_or("no u")?;
            let (a, b) = (
                parent_accepted(&t, "gw", Some("dns-tcp")),
                parent_accepted(&u, "gw", Some("dns-udp")),
            );
            let yes = cond("True", "Accepted");
            if a == yes && b == yes {
                Ok(())
            } else {
                Err(format!("{a:?} {b:?}"))
            }
        },
    )
    .await;
}

fn tcp_and_udp_answer_on_that_port(port: u16) {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    writeln!(tcp, "hello").unwrap();
    let mut line = String::new();
    BufReader::new(tcp).read_line(&mut line).unwrap();
    assert_eq!(line.trim_end(), "tcp hello");

    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 256];
    // A datagram may go before Envoy's UDP session is up: retry a few times.
    let reply = (0..10).find_map(|_| {
        udp.send_to(b"hello", ("127.0.0.1", port)).unwrap();
        let n = udp.recv(&mut buf).ok()?;
        Some(String::from_utf8_lossy(&buf[..n]).to_string())
    });
    assert_eq!(reply.as_deref(), Some("udp hello"));
}
