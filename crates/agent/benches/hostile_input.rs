//! The hostile-input probe of issue 28, re-measured through a real Envoy:
//! `aether-edge standalone` serving two Gateways (gw1 on one port, gw2 on
//! another, each with its own route file), keep-alive clients on gw1, and one
//! attack at a time put in place beside them:
//!
//! ```text
//!  clients ─► Envoy :gw1 ─► b0        attack in the config dir (or on the admin port)
//!             Envoy :gw2 ─► b1        then, while it is in place:
//!                 ▲ ADS                 unrelated update: gw2's route file renamed into
//!             aether-edge ◄── config     place, a new hostname → first 200 through Envoy
//!             (VmHWM read at the end)   same-Gateway update: the same on gw1
//! ```
//!
//! Attacks (the issue's list): a 200 KB file nesting 100k deep behind `!!str`,
//! an alias bomb behind `!!str`, a 50 MB file, 21,000 half-sent admin
//! connections (from two helper processes: one process may hold 20,000
//! descriptors here), a link to /proc/kmsg and a FIFO in the directory, a slow
//! writer holding a file open (a chunk every 200 ms), 20 files of 4 MB (4,000
//! ConfigMaps each), a route on gw1 with a 20 KB header value.
//!
//! One row per attack: requests sent and failed (non-200 or no answer) over the
//! whole row, the agent's peak RSS (VmHWM: startup included), and the two update
//! times (`> 30 s` when not seen). Numbers only, nothing asserted.
//!
//! `cargo bench -p aether-edge --bench hostile_input [-- <attack names>…]`

#[path = "../tests/support/mod.rs"]
mod support;

use aether_testkit::live::traffic::{Load, Target, probe, write_atomically};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::*;

/// How long an update may take before the row says `> 30 s`.
const UPDATE_WAIT: Duration = Duration::from_secs(30);

/// What an attack leaves running until the row is done (children, threads).
type Running = Vec<Box<dyn std::any::Any>>;

struct Attack {
    name: &'static str,
    start: fn(&World) -> Running,
}

const ATTACKS: &[Attack] = &[
    Attack {
        name: "none",
        start: |_| vec![],
    },
    Attack {
        name: "nested-100k",
        start: nested,
    },
    Attack {
        name: "alias-bomb",
        start: alias_bomb,
    },
    Attack {
        name: "file-50MB",
        start: big_file,
    },
    Attack {
        name: "admin-21000",
        start: admin_connections,
    },
    Attack {
        name: "kmsg-and-fifo",
        start: blocking_files,
    },
    Attack {
        name: "slow-writer",
        start: slow_writer,
    },
    Attack {
        name: "20-files-4MB",
        start: twenty_files,
    },
    Attack {
        name: "header-20KB",
        start: long_header,
    },
];

/// One probe world: its directory, backends, ports, agent and Envoy.
struct World {
    dir: PathBuf,
    admin: String,
    gw1: u16,
    gw2: u16,
    backends: [Backend; 2],
    agent: Agent,
    _envoy: Envoy,
}

fn gateway(name: &str, port: u16) -> String {
    mk_gateway(
        "default",
        name,
        &[&format!("{{name: http, protocol: HTTP, port: {port}}}")],
    )
}

/// HTTPRoute `name` on `gw` for `host`, everything to `backend`.
fn route(name: &str, gw: &str, host: &str, backend: &str) -> String {
    mk_route(
        "HTTPRoute",
        "default",
        name,
        &format!(
            "  parentRefs: [{{name: {gw}}}]\n  hostnames: [{host}]\n  rules:\n  \
             - backendRefs: [{{name: {backend}, port: 80}}]\n"
        ),
    )
}

impl World {
    fn start(logs: &Path) -> World {
        let dir = logs.join("config");
        std::fs::create_dir_all(&dir).unwrap();
        let backends = [Backend::start("b0"), Backend::start("b1")];
        let (gw1, gw2) = (free_port(), free_port());
        let class = "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\n\
                     metadata: {name: aether}\nspec: {controllerName: gateway.aether.io/edge}\n";
        let services = format!(
            "{}---\n{}",
            backends[0].yaml("default"),
            backends[1].yaml("default")
        );
        let files = [
            ("class.yaml", class.to_string()),
            ("services.yaml", services),
            ("gw1.yaml", gateway("gw1", gw1)),
            ("gw2.yaml", gateway("gw2", gw2)),
            ("route1.yaml", route("r1", "gw1", "gw1.example", "b0")),
            ("route2.yaml", route("r2", "gw2", "gw2.example", "b1")),
        ];
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        let xds = format!("127.0.0.1:{}", free_port());
        let admin = format!("127.0.0.1:{}", free_port());
        let agent = Agent::start(agent_bin(), &dir, &xds, &admin, logs, &[]);
        let envoy = envoy("probe", &xds, true, logs);
        let world = World {
            dir,
            admin,
            gw1,
            gw2,
            backends,
            agent,
            _envoy: envoy,
        };
        for (port, gw) in [(gw1, "gw1"), (gw2, "gw2")] {
            if world.first_200(port, &format!("{gw}.example")).is_none() {
                panic!("{gw} never answered 200; logs in {}", logs.display());
            }
        }
        world
    }

    fn target(port: u16, host: &str) -> Target {
        Target {
            addr: format!("127.0.0.1:{port}"),
            host: host.into(),
            path: "/".into(),
            sni: None,
        }
    }

    /// How long until `host` on `port` answers 200 through Envoy.
    fn first_200(&self, port: u16, host: &str) -> Option<Duration> {
        let target = World::target(port, host);
        let started = Instant::now();
        while started.elapsed() < UPDATE_WAIT {
            if probe(&target).is_some_and(|(status, ..)| status == 200) {
                return Some(started.elapsed());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }

    /// A route on `gw` for a hostname nothing served before (Envoy answers
    /// 404 for it until then), its file renamed into place → the time to
    /// its first 200.
    fn update(&self, gw: &str, port: u16, n: usize) -> Option<Duration> {
        let host = format!("update-{n}.{gw}.example");
        assert!(probe(&World::target(port, &host)).is_some_and(|(s, ..)| s == 404));
        let backend = if gw == "gw1" { "b0" } else { "b1" };
        let text = route(&format!("u-{gw}"), gw, &host, backend);
        write_atomically(&self.dir.join(format!("update-{gw}.yaml")), &text);
        self.first_200(port, &host)
    }

    /// The agent's peak resident memory (VmHWM), in MiB.
    fn peak_rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.agent.proc.pid()))
            .unwrap_or_default();
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0.0);
        kib / 1024.0
    }
}

// The attacks. Each puts itself in place and returns what must keep running.

fn nested(w: &World) -> Running {
    let depth = 100_000;
    let text = format!(
        "t: !!str x\nv: {}{}\n",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    write_atomically(&w.dir.join("nested.yaml"), &text);
    vec![]
}

fn alias_bomb(w: &World) -> Running {
    let mut text = String::from("t: !!str x\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        text.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    write_atomically(&w.dir.join("bomb.yaml"), &text);
    vec![]
}

fn big_file(w: &World) -> Running {
    let line = format!("# {}\n", "x".repeat(1022));
    write_atomically(&w.dir.join("big.yaml"), &line.repeat(50 * 1024));
    vec![]
}

fn admin_connections(w: &World) -> Running {
    // Each helper opens its share, sends half a request on each, and holds them.
    let script = "import socket,sys,time\nhost,port=sys.argv[1].rsplit(':',1)\nheld=[]\n\
                  for _ in range(int(sys.argv[2])):\n  try:\n    s=socket.create_connection((host,int(port)),timeout=2)\n    \
                  s.sendall(b'GET /healthz HTTP/1.1\\r\\nHost: x')\n    held.append(s)\n  except OSError:\n    pass\n\
                  print('admin attack:',len(held),'half-sent connections opened',flush=True)\ntime.sleep(3600)\n";
    (0..2)
        .map(|_| {
            let child = std::process::Command::new("python3")
                .args(["-c", script, &w.admin, "10500"])
                .spawn()
                .expect("python3");
            Box::new(Killed(child)) as Box<dyn std::any::Any>
        })
        .collect()
}

fn blocking_files(w: &World) -> Running {
    std::os::unix::fs::symlink("/proc/kmsg", w.dir.join("kmsg.yaml")).unwrap();
    let fifo = w.dir.join("fifo.yaml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    vec![]
}

fn slow_writer(w: &World) -> Running {
    let text = route("slow", "gw1", "slow.gw1.example", "b0");
    let mut file = std::fs::File::create(w.dir.join("slow.yaml")).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let thread = std::thread::spawn({
        let stop = stop.clone();
        move || {
            // A chunk every 200 ms, the file held open all along.
            for chunk in text.as_bytes().chunks(8).cycle() {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                let _ = file.write_all(chunk);
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    });
    vec![Box::new(Stopped(stop, Some(thread)))]
}

fn twenty_files(w: &World) -> Running {
    let data = "d".repeat(900);
    for f in 0..20 {
        let text: String = (0..4_000)
            .map(|i| {
                format!(
                    "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: f{f}-{i}, namespace: fill}}\n\
                     data: {{k: {data}}}\n"
                )
            })
            .collect();
        write_atomically(&w.dir.join(format!("fill-{f:02}.yaml")), &text);
    }
    vec![]
}

fn long_header(w: &World) -> Running {
    let value = "v".repeat(20 * 1024);
    let text = mk_route(
        "HTTPRoute",
        "default",
        "long-header",
        &format!(
            "  parentRefs: [{{name: gw1}}]\n  hostnames: [gw1.example]\n  rules:\n  \
             - matches: [{{path: {{type: PathPrefix, value: /long}}, headers: [{{name: x-long, value: {value}}}]}}]\n    \
             backendRefs: [{{name: b0, port: 80}}]\n"
        ),
    );
    write_atomically(&w.dir.join("long-header.yaml"), &text);
    vec![]
}

/// A child process killed when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A thread told to stop, and joined, when dropped.
struct Stopped(
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    Option<std::thread::JoinHandle<()>>,
);

impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.1.take() {
            let _ = t.join();
        }
    }
}

struct Row {
    sent: u64,
    failed: u64,
    rss_mib: f64,
    unrelated: Option<Duration>,
    same: Option<Duration>,
}

fn run(attack: &Attack) -> Row {
    let logs = temp_dir(&format!("hostile-{}", attack.name));
    let world = World::start(&logs);
    let load = Load::start(
        &World::target(world.gw1, "gw1.example"),
        4,
        Duration::from_millis(2),
    );
    std::thread::sleep(Duration::from_secs(1));
    let running = (attack.start)(&world);
    // Let the agent meet the attack before the updates.
    std::thread::sleep(Duration::from_secs(2));
    let unrelated = world.update("gw2", world.gw2, 1);
    let same = world.update("gw1", world.gw1, 2);
    std::thread::sleep(Duration::from_secs(1));
    let tally = load.stop();
    let rss_mib = world.peak_rss_mib();
    drop(running);
    let _ = &world.backends;
    drop(world);
    let _ = std::fs::remove_dir_all(&logs);
    Row {
        sent: tally.sent,
        failed: tally.lost(),
        rss_mib,
        unrelated,
        same,
    }
}

fn ms(d: Option<Duration>) -> String {
    d.map_or_else(
        || format!("> {} s", UPDATE_WAIT.as_secs()),
        |d| format!("{:.0} ms", d.as_secs_f64() * 1e3),
    )
}

fn main() {
    let names: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    println!("hostile input, standalone + real Envoy, 4 keep-alive clients on gw1");
    println!(
        "| attack | requests failed | agent peak RSS | unrelated update | same-Gateway update |"
    );
    println!("|---|---|---|---|---|");
    for attack in ATTACKS {
        if !names.is_empty() && !names.iter().any(|n| n == attack.name) {
            continue;
        }
        let row = run(attack);
        println!(
            "| {} | {} / {} | {:.0} MiB | {} | {} |",
            attack.name,
            row.failed,
            row.sent,
            row.rss_mib,
            ms(row.unrelated),
            ms(row.same)
        );
    }
}
