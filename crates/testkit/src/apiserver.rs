//! [`ApiServer`]: etcd + kube-apiserver on loopback, one private directory per instance.
//!
//! ```text
//!   <tmp>/aether-testkit-<pid>-<random>/     removed on drop (kept with AETHER_TESTKIT_KEEP=1)
//!     pki/        CA, serving cert, SA keys, token file       (pki.rs)
//!     etcd-1/     etcd data            ◀── etcd        127.0.0.1:<e>  (peer <p>)
//!     kubeconfig  token + ca.crt       ──▶ kube-apiserver  https://127.0.0.1:<port>
//!     *.log       process output; the tail is quoted in startup errors
//!     pids        what the watchdog kills if the test dies without unwinding
//! ```
//!
//! etcd starts on a copy of a seed (seed.rs): the data of an etcd whose API server
//! already bootstrapped and established the CRDs, made by the first start.
//!
//! `stop_apiserver`/`start_apiserver` kill and respawn kube-apiserver with the same
//! arguments: same port, same etcd, so clients and watches see an outage, then recovery.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::pki::{self, Credentials};
use crate::process::{self, Process};
use crate::run_dir::{RunDir, write_kubeconfig};
use crate::{Error, crds, etcd, locate, manifests, seed, service_account};

const ETCD_TIMEOUT: Duration = Duration::from_secs(30);
const READY_TIMEOUT: Duration = Duration::from_secs(90);
const START_ATTEMPTS: usize = 3;

/// A running kube-apiserver backed by its own etcd, with the Gateway API CRDs installed.
/// Dropping it kills both processes and removes every file it made.
#[derive(Debug)]
pub struct ApiServer {
    // Field order is drop order: processes die before their directory is removed.
    apiserver: Option<Process>,
    etcd: Process,
    apiserver_program: PathBuf,
    apiserver_args: Vec<String>,
    port: u16,
    etcd_port: u16,
    config: kube::Config,
    credentials: Credentials,
    run: RunDir,
}

impl ApiServer {
    /// Starts etcd and kube-apiserver and installs the CRDs; panics (with the processes'
    /// last log lines) if that fails. Use [`ApiServer::try_start`] to handle the error.
    pub async fn start() -> ApiServer {
        match ApiServer::try_start().await {
            Ok(server) => server,
            Err(e) => panic!("aether-testkit: cannot start kube-apiserver: {e}"),
        }
    }

    /// [`ApiServer::start`] without the pinned CRDs named (`<plural>.<group>`):
    /// for a test that installs other versions of them, or none, on an API
    /// server that never had them. Deleting CRDs moments after they were
    /// established waits on kube-apiserver's CRD finalizer, whose retries back
    /// off exponentially while the server starts up: once, over a minute.
    pub async fn start_without(names: &[&str]) -> ApiServer {
        match ApiServer::try_start_without(names).await {
            Ok(server) => server,
            Err(e) => panic!("aether-testkit: cannot start kube-apiserver: {e}"),
        }
    }

    /// [`ApiServer::start`], returning the error. A port another process took between
    /// our pick and the bind is retried with fresh ports.
    pub async fn try_start() -> Result<ApiServer, Error> {
        ApiServer::try_start_without(&[]).await
    }

    /// [`ApiServer::start_without`], returning the error.
    pub async fn try_start_without(names: &[&str]) -> Result<ApiServer, Error> {
        let begin = Instant::now();
        let bin_dir = locate::kube_bin_dir().await?;
        let crd_dir = locate::gateway_api_crd_dir().await?;
        let mut crds = crds::read(&crd_dir)?;
        let left_out = |c: &CustomResourceDefinition| {
            c.metadata
                .name
                .as_deref()
                .is_some_and(|n| names.contains(&n))
        };
        if crds.iter().filter(|c| left_out(c)).count() != names.len() {
            return Err(Error::NoCrds(crd_dir));
        }
        crds.retain(|c| !left_out(c));
        let seed = if seed::enabled() {
            let seed = seed::path(&bin_dir, &crds, STATE_FLAGS)?;
            seed::get_or_make(&seed, || make_seed(&bin_dir, &crds)).await?;
            Some(seed)
        } else {
            None
        };
        let run = RunDir::create()?;
        let credentials = pki::generate(&run.path)?;
        let launched = launch_retrying(&run, &bin_dir, &credentials, seed.as_deref()).await?;
        let ready = begin.elapsed();
        let config = client_config(&run.kubeconfig()).await?;
        let server = ApiServer {
            apiserver: Some(launched.apiserver),
            etcd: launched.etcd,
            apiserver_program: bin_dir.join("kube-apiserver"),
            apiserver_args: launched.args,
            port: launched.port,
            etcd_port: launched.etcd_port,
            config,
            credentials,
            run,
        };
        let how = if seed.is_some() {
            seed::await_discovery(&server.client(), &crds).await?;
            "seeded, served"
        } else {
            crds::install(&server.client(), &crds).await?;
            "Established"
        };
        let msg = format!(
            "aether-testkit: kube-apiserver {} ready in {:.1} s, {} CRDs {how} at {:.1} s",
            server.url(),
            ready.as_secs_f64(),
            crds.len(),
            begin.elapsed().as_secs_f64()
        );
        tracing::info!("{msg}");
        eprintln!("{msg}");
        Ok(server)
    }

    /// A client authenticated as an admin (group `system:masters`) that trusts the run's
    /// CA. Must be called inside a tokio runtime.
    pub fn client(&self) -> Client {
        Client::try_from(self.config.clone()).expect("kube client from a valid config")
    }

    /// A client acting as `user` in `groups` through impersonation, so it has exactly the
    /// rights RBAC gives that identity (e.g. `system:serviceaccount:<ns>:<name>`).
    pub fn client_as(&self, user: &str, groups: &[&str]) -> Client {
        let mut config = self.config.clone();
        config.auth_info.impersonate = Some(user.to_string());
        config.auth_info.impersonate_groups = Some(groups.iter().map(|g| g.to_string()).collect());
        Client::try_from(config).expect("kube client from a valid config")
    }

    /// A kubeconfig file (server, CA file, admin token) for child processes, e.g.
    /// `aether-edge agent --kubeconfig <path>` or `KUBECONFIG=<path>`.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.run.kubeconfig_path
    }

    /// `https://127.0.0.1:<port>`; the port stays the same across restarts.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// Server-side applies the YAML documents in `yaml` (field manager `aether-testkit`),
    /// in order, as admin; returns `Kind namespace/name` per object.
    pub async fn apply(&self, yaml: &str) -> Result<Vec<String>, Error> {
        manifests::apply(&self.client(), yaml).await
    }

    /// Deletes the CRDs named (`<plural>.<group>`), waiting until they are gone: a
    /// cluster where those kinds are not installed.
    pub async fn delete_crds(&self, names: &[&str]) -> Result<(), Error> {
        crds::delete(&self.client(), names).await
    }

    /// Creates the CRDs named (`<plural>.<group>`) from the `*.yaml` of `dir` (e.g.
    /// [`crate::gateway_api_crd_dir_at`]) and waits until they are Established.
    /// Delete the installed ones first to replace them.
    pub async fn install_crds(&self, dir: &Path, names: &[&str]) -> Result<(), Error> {
        let wanted: Vec<_> = crds::read(dir)?
            .into_iter()
            .filter(|c| {
                c.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| names.contains(&n))
            })
            .collect();
        if wanted.len() != names.len() {
            return Err(Error::NoCrds(dir.to_path_buf()));
        }
        crds::install(&self.client(), &wanted).await?;
        Ok(())
    }

    /// A kubeconfig file authenticating as ServiceAccount `namespace/name` with a real
    /// token (TokenRequest API); the ServiceAccount and Namespace are created if missing.
    /// For running a child process with exactly the rights its RBAC grants.
    pub async fn service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<PathBuf, Error> {
        let token = service_account::token(&self.client(), namespace, name).await?;
        let path = self.run.path.join(format!("kubeconfig-{namespace}-{name}"));
        let user = format!("system:serviceaccount:{namespace}:{name}");
        write_kubeconfig(
            &path,
            self.port,
            &self.credentials.ca_cert,
            &user,
            &token,
            namespace,
        )?;
        Ok(path)
    }

    /// A client authenticating as ServiceAccount `namespace/name`, see
    /// [`ApiServer::service_account_kubeconfig`].
    pub async fn service_account_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Client, Error> {
        let path = self.service_account_kubeconfig(namespace, name).await?;
        let config = client_config(&Kubeconfig::read_from(&path)?).await?;
        Ok(Client::try_from(config)?)
    }

    /// The admin bearer token.
    pub fn token(&self) -> &str {
        &self.credentials.token
    }

    /// The PEM CA certificate the serving certificate chains to.
    pub fn ca_cert_path(&self) -> &Path {
        &self.credentials.ca_cert
    }

    /// Pids of etcd, kube-apiserver (if running) and the watchdog, for leak checks.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids = vec![self.etcd.pid(), self.run.watchdog.pid()];
        pids.extend(self.apiserver.as_ref().map(Process::pid));
        pids
    }

    /// The instance's private directory (logs, etcd data, credentials).
    pub fn dir(&self) -> &Path {
        &self.run.path
    }

    /// Kills kube-apiserver (SIGKILL: an outage, not a graceful shutdown). etcd keeps
    /// running. No effect if it is already stopped.
    pub async fn stop_apiserver(&mut self) {
        if let Some(mut apiserver) = self.apiserver.take() {
            // SIGKILL + reap takes milliseconds; fine on the runtime thread.
            apiserver.kill();
        }
        self.run.write_pids(&[self.etcd.pid()]);
    }

    /// Writes a key outside `/registry` and compacts etcd at the resulting revision, which
    /// it returns. Called between [`ApiServer::stop_apiserver`] and
    /// [`ApiServer::start_apiserver`], it makes every watch resuming from an older
    /// resourceVersion fail with `410 Gone` (a running API server's watch cache may still
    /// serve recent history).
    pub async fn compact_etcd(&self) -> Result<i64, Error> {
        etcd::compact(self.etcd_port).await
    }

    /// Starts kube-apiserver again on the same port against the same etcd and waits for
    /// `/readyz`; panics if it does not come up. No effect if it is running.
    pub async fn start_apiserver(&mut self) {
        if self.apiserver.is_some() {
            return;
        }
        let begin = Instant::now();
        let log = self.run.path.join("kube-apiserver.log");
        let apiserver = Process::spawn(
            "kube-apiserver",
            &self.apiserver_program,
            &self.apiserver_args,
            &log,
        )
        .unwrap_or_else(|e| panic!("aether-testkit: {e}"));
        self.run.write_pids(&[self.etcd.pid(), apiserver.pid()]);
        let mut apiserver = apiserver;
        let result = wait_ready(&self.run.kubeconfig(), &mut self.etcd, &mut apiserver).await;
        self.apiserver = Some(apiserver);
        if let Err(e) = result {
            panic!("aether-testkit: kube-apiserver restart failed: {e}");
        }
        eprintln!(
            "aether-testkit: kube-apiserver {} restarted in {:.1} s",
            self.url(),
            begin.elapsed().as_secs_f64()
        );
    }
}

/// etcd and kube-apiserver, both ready.
struct Launched {
    etcd: Process,
    apiserver: Process,
    args: Vec<String>,
    port: u16,
    etcd_port: u16,
    /// etcd's data directory.
    data: PathBuf,
}

/// kube-apiserver's flags that shape what it stores in etcd (the rest name ports and
/// files): part of the seed's key.
const STATE_FLAGS: &[&str] = &[
    "--authorization-mode=RBAC",
    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
    "--service-cluster-ip-range=10.96.0.0/16",
    // No controller-manager creates default ServiceAccounts, so Pods would be refused.
    "--disable-admission-plugins=ServiceAccount",
    "--allow-privileged=true",
    // The `kubernetes` Service's endpoint would be 127.0.0.1, which validation refuses
    // (a loud retry every 10 s); nothing here routes to it anyway.
    "--endpoint-reconciler-type=none",
    "--profiling=false",
    // ClusterTrustBundle (beta in 1.34, off by default): a CA the Gateway API
    // may name in caCertificateRefs.
    "--feature-gates=ClusterTrustBundle=true",
    "--runtime-config=certificates.k8s.io/v1beta1/clustertrustbundles=true",
];

/// A fresh etcd and kube-apiserver with `crds` installed, then stopped: the seed's
/// data directory and the run directory holding it.
async fn make_seed(
    bin_dir: &Path,
    crds: &[CustomResourceDefinition],
) -> Result<(RunDir, PathBuf), Error> {
    let run = RunDir::create()?;
    let credentials = pki::generate(&run.path)?;
    let mut launched = launch_retrying(&run, bin_dir, &credentials, None).await?;
    let client = Client::try_from(client_config(&run.kubeconfig()).await?)?;
    crds::install(&client, crds).await?;
    launched.apiserver.kill();
    launched.etcd.terminate(Duration::from_secs(10));
    Ok((run, launched.data))
}

/// [`launch`], retried with fresh ports when another process took one between our
/// pick and the bind.
async fn launch_retrying(
    run: &RunDir,
    bin_dir: &Path,
    credentials: &Credentials,
    seed: Option<&Path>,
) -> Result<Launched, Error> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match launch(run, bin_dir, credentials, attempt, seed).await {
            Ok(launched) => return Ok(launched),
            Err(e) if e.is_port_conflict() && attempt < START_ATTEMPTS => {
                tracing::warn!(attempt, error = %e, "aether-testkit: port taken, retrying");
            }
            Err(e) => return Err(e),
        }
    }
}

/// Starts etcd (on a copy of `seed`'s data, if given), then kube-apiserver, on fresh
/// ports and waits until `/readyz` says ok.
async fn launch(
    run: &RunDir,
    bin_dir: &Path,
    credentials: &Credentials,
    attempt: usize,
    seed: Option<&Path>,
) -> Result<Launched, Error> {
    let ports = process::free_ports(3)?;
    let (client_port, peer_port, port) = (ports[0], ports[1], ports[2]);
    let etcd_url = format!("http://127.0.0.1:{client_port}");
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    let data = run.path.join(format!("etcd-{attempt}"));
    if let Some(seed) = seed {
        seed::copy_sparse(seed, &data)?;
    }
    let etcd_args = vec![
        "--name=testkit".to_string(),
        format!("--data-dir={}", data.display()),
        format!("--listen-client-urls={etcd_url}"),
        format!("--advertise-client-urls={etcd_url}"),
        format!("--listen-peer-urls={peer_url}"),
        format!("--initial-advertise-peer-urls={peer_url}"),
        format!("--initial-cluster=testkit={peer_url}"),
        // Test data: durability buys nothing and fsync costs seconds on a busy disk.
        "--unsafe-no-fsync=true".to_string(),
        "--log-level=warn".to_string(),
    ];
    let mut etcd = Process::spawn(
        "etcd",
        &bin_dir.join("etcd"),
        &etcd_args,
        &run.path.join("etcd.log"),
    )?;
    run.write_pids(&[etcd.pid()]);
    wait_listening(&mut etcd, client_port).await?;

    let c = credentials;
    let mut args = vec![
        format!("--etcd-servers={etcd_url}"),
        "--bind-address=127.0.0.1".to_string(),
        "--advertise-address=127.0.0.1".to_string(),
        format!("--secure-port={port}"),
        format!("--cert-dir={}", run.path.join("cert").display()),
        format!("--tls-cert-file={}", c.serving_cert.display()),
        format!("--tls-private-key-file={}", c.serving_key.display()),
        format!("--token-auth-file={}", c.token_file.display()),
        format!("--service-account-key-file={}", c.sa_pub.display()),
        format!("--service-account-signing-key-file={}", c.sa_key.display()),
    ];
    args.extend(STATE_FLAGS.iter().map(|f| f.to_string()));
    let program = bin_dir.join("kube-apiserver");
    let mut apiserver = Process::spawn(
        "kube-apiserver",
        &program,
        &args,
        &run.path.join("kube-apiserver.log"),
    )?;
    run.write_pids(&[etcd.pid(), apiserver.pid()]);
    let c = credentials;
    write_kubeconfig(
        &run.kubeconfig_path,
        port,
        &c.ca_cert,
        "aether-admin",
        &c.token,
        "default",
    )?;
    wait_ready(&run.kubeconfig(), &mut etcd, &mut apiserver).await?;
    Ok(Launched {
        etcd,
        apiserver,
        args,
        port,
        etcd_port: client_port,
        data,
    })
}

async fn wait_listening(etcd: &mut Process, port: u16) -> Result<(), Error> {
    let begin = Instant::now();
    loop {
        if let Some(status) = etcd.exited() {
            return Err(exited(etcd, status));
        }
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        if begin.elapsed() > ETCD_TIMEOUT {
            return Err(Error::NotReady {
                name: etcd.name(),
                secs: ETCD_TIMEOUT.as_secs(),
                last: format!("nothing listening on 127.0.0.1:{port}"),
                log: etcd.log_tail(30),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `/readyz` until it answers `ok`, failing early if either process exits.
async fn wait_ready(
    kubeconfig: &Kubeconfig,
    etcd: &mut Process,
    apiserver: &mut Process,
) -> Result<(), Error> {
    let mut config = client_config(kubeconfig).await?;
    config.default_retry = false;
    config.connect_timeout = Some(Duration::from_secs(1));
    config.read_timeout = Some(Duration::from_secs(5));
    let client = Client::try_from(config)?;
    let begin = Instant::now();
    loop {
        for process in [&mut *etcd, &mut *apiserver] {
            if let Some(status) = process.exited() {
                return Err(exited(process, status));
            }
        }
        let request = http::Request::get("/readyz")
            .body(Vec::new())
            .expect("static request");
        let last = match client.request_text(request).await {
            Ok(body) if body.trim() == "ok" => return Ok(()),
            Ok(body) => body,
            Err(e) => e.to_string(),
        };
        if begin.elapsed() > READY_TIMEOUT {
            return Err(Error::NotReady {
                name: apiserver.name(),
                secs: READY_TIMEOUT.as_secs(),
                last,
                log: apiserver.log_tail(30),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn exited(process: &Process, status: String) -> Error {
    Error::Exited {
        name: process.name(),
        status,
        log: process.log_tail(30),
    }
}

async fn client_config(kubeconfig: &Kubeconfig) -> Result<kube::Config, Error> {
    Ok(
        kube::Config::from_custom_kubeconfig(kubeconfig.clone(), &KubeConfigOptions::default())
            .await?,
    )
}
