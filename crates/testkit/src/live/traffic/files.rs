//! The files a scenario writes: atomically, and certificates as Secrets.

use std::path::Path;

/// Writes `text` to `path` the way a careful program replaces a file: into a
/// temp file beside it (a dot file no `*.yaml` glob matches), renamed over it.
pub fn write_atomically(path: &Path, text: &str) {
    let name = path.file_name().unwrap().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A fresh self-signed certificate for `cn` (also its SAN), EC P-256, as PEM
/// (certificate, key), made with the `openssl` command.
pub fn self_signed_cert(cn: &str) -> (String, String) {
    let dir = crate::live::temp_dir("cert");
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let out = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args(["-subj", &format!("/CN={cn}")])
        .args(["-addext", &format!("subjectAltName=DNS:{cn}")])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("the `openssl` command, to make a certificate");
    assert!(out.status.success(), "openssl req: {out:?}");
    let pem = (
        std::fs::read_to_string(&cert).unwrap(),
        std::fs::read_to_string(&key).unwrap(),
    );
    let _ = std::fs::remove_dir_all(dir);
    pem
}

/// A `kubernetes.io/tls` Secret `ns/name` holding `cert` and `key` (PEM).
pub fn tls_secret_yaml(ns: &str, name: &str, (cert, key): &(String, String)) -> String {
    let indent = |pem: &str| {
        pem.lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    };
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {ns}}}\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
        indent(cert),
        indent(key)
    )
}
