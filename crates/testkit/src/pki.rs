//! Per-run credentials, made with the `openssl` CLI (no crypto crates to build):
//!
//! ```text
//!   ca.crt / ca.key ──signs──▶ serving.crt / serving.key   (SAN IP:127.0.0.1, DNS:localhost)
//!   sa.key / sa.pub            service-account token signing (ES256)
//!   tokens.csv                 "<admin token>,aether-admin,aether-admin,system:masters"
//! ```
//!
//! EC P-256 keys keep generation in the milliseconds. The CA is a real CA (not the
//! serving certificate trusted as its own root): rustls refuses a CA certificate used as
//! an end entity, and child processes get the same `ca.crt` through the kubeconfig.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Error;

/// The files one run of kube-apiserver needs, all inside the run's directory.
#[derive(Debug, Clone)]
pub(crate) struct Credentials {
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub sa_key: PathBuf,
    pub sa_pub: PathBuf,
    pub token_file: PathBuf,
    pub token: String,
}

/// Generates a CA, a serving certificate for 127.0.0.1, a service-account key pair and an
/// admin token in `dir/pki`.
pub(crate) fn generate(dir: &Path) -> Result<Credentials, Error> {
    let pki = dir.join("pki");
    std::fs::create_dir_all(&pki).map_err(|e| Error::io("create pki dir", &pki, e))?;
    let p = |name: &str| pki.join(name);

    issue(
        &pki,
        ("ca.key", "ca.crt"),
        "/CN=aether-testkit-ca",
        &[
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    )?;
    // OpenSSL 3 `req -x509 -CA` issues the request's certificate signed by the CA directly.
    issue(
        &pki,
        ("serving.key", "serving.crt"),
        "/CN=kube-apiserver",
        &[
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-addext",
            "basicConstraints=critical,CA:FALSE",
            "-addext",
            "keyUsage=critical,digitalSignature,keyEncipherment",
            "-addext",
            "extendedKeyUsage=serverAuth",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc",
        ],
    )?;
    openssl(
        &pki,
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            "sa.key",
        ],
    )?;
    openssl(&pki, &["ec", "-in", "sa.key", "-pubout", "-out", "sa.pub"])?;

    let token = random_hex(16)?;
    let token_file = p("tokens.csv");
    std::fs::write(
        &token_file,
        format!("{token},aether-admin,aether-admin,\"system:masters\"\n"),
    )
    .map_err(|e| Error::io("write token file", &token_file, e))?;

    Ok(Credentials {
        ca_cert: p("ca.crt"),
        serving_cert: p("serving.crt"),
        serving_key: p("serving.key"),
        sa_key: p("sa.key"),
        sa_pub: p("sa.pub"),
        token_file,
        token,
    })
}

/// A new P-256 key `key` and a certificate `cert` for it (2 days, `subject`), in
/// `dir`: self-signed, or as `more` says (e.g. `-CA`, extensions).
fn issue(dir: &Path, (key, cert): (&str, &str), subject: &str, more: &[&str]) -> Result<(), Error> {
    let mut args = vec![
        "req",
        "-x509",
        "-new",
        "-nodes",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-keyout",
        key,
        "-out",
        cert,
        "-days",
        "2",
        "-subj",
        subject,
    ];
    args.extend_from_slice(more);
    openssl(dir, &args)
}

fn openssl(dir: &Path, args: &[&str]) -> Result<(), Error> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| Error::Spawn {
            program: "openssl".into(),
            source: e,
        })?;
    if !out.status.success() {
        return Err(Error::Openssl {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(())
}

/// `n` bytes from the kernel's CSPRNG, hex-encoded.
pub(crate) fn random_hex(n: usize) -> Result<String, Error> {
    let mut buf = vec![0u8; n];
    let path = Path::new("/dev/urandom");
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut buf))
        .map_err(|e| Error::io("read", path, e))?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn openssl_stdout(args: &[&str]) -> String {
        let out = Command::new("openssl").args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn serving_certificate_chains_to_the_ca_and_names_loopback() {
        let dir =
            std::env::temp_dir().join(format!("aether-testkit-pki-{}", random_hex(4).unwrap()));
        let c = generate(&dir).unwrap();
        let ca = c.ca_cert.to_str().unwrap();
        let serving = c.serving_cert.to_str().unwrap();
        let verify = openssl_stdout(&["verify", "-CAfile", ca, "-purpose", "sslserver", serving]);
        assert!(verify.trim().ends_with("OK"), "{verify}");
        let san = openssl_stdout(&["x509", "-in", serving, "-noout", "-ext", "subjectAltName"]);
        assert!(san.contains("IP Address:127.0.0.1"), "{san}");
        assert!(san.contains("DNS:localhost"), "{san}");
        // The CA must not be usable as the server's own certificate (rustls refuses that).
        let ca_text = openssl_stdout(&["x509", "-in", ca, "-noout", "-ext", "basicConstraints"]);
        assert!(ca_text.contains("CA:TRUE"), "{ca_text}");

        assert_eq!(c.token.len(), 32);
        assert!(c.token.chars().all(|ch| ch.is_ascii_hexdigit()));
        let line = std::fs::read_to_string(&c.token_file).unwrap();
        assert_eq!(
            line,
            format!("{},aether-admin,aether-admin,\"system:masters\"\n", c.token)
        );
        for key in [&c.serving_key, &c.sa_key, &c.sa_pub] {
            assert!(
                std::fs::metadata(key).unwrap().len() > 0,
                "{}",
                key.display()
            );
        }

        let again = generate(&dir.join("again")).unwrap();
        assert_ne!(again.token, c.token);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
