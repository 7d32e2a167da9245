//! Installs the Gateway API CRDs: every `CustomResourceDefinition` document of the
//! directory's `*.yaml` files (other kinds, such as the bundle's ValidatingAdmissionPolicy,
//! are left out: the kit creates CRDs and nothing else), created concurrently, then awaited
//! until `Established` so the first Gateway a test creates is accepted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::future::try_join_all;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::PostParams;
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};
use serde::Deserialize;

use crate::Error;

const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);

/// Reads the CRDs of `dir`, sorted by file name.
pub(crate) fn read(dir: &Path) -> Result<Vec<CustomResourceDefinition>, Error> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io("read CRD dir", dir, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    let mut crds = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|e| Error::io("read", &file, e))?;
        for doc in serde_norway::Deserializer::from_str(&text) {
            let parse = |e| Error::CrdParse {
                path: file.clone(),
                source: e,
            };
            let value = serde_norway::Value::deserialize(doc).map_err(parse)?;
            if value.get("kind").and_then(|k| k.as_str()) == Some("CustomResourceDefinition") {
                crds.push(serde_norway::from_value(value).map_err(parse)?);
            }
        }
    }
    if crds.is_empty() {
        return Err(Error::NoCrds(dir.to_path_buf()));
    }
    Ok(crds)
}

/// Creates `crds` and waits until each is Established. Returns their names, sorted.
pub(crate) async fn install(
    client: &Client,
    crds: &[CustomResourceDefinition],
) -> Result<Vec<String>, Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    try_join_all(crds.iter().map(|crd| {
        let api = api.clone();
        async move { api.create(&PostParams::default(), crd).await }
    }))
    .await?;
    let mut names: Vec<String> = crds
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    names.sort();
    try_join_all(names.iter().map(|name| {
        let api = api.clone();
        async move {
            let established = await_condition(api, name, conditions::is_crd_established());
            within_timeout(name, "Established", established).await
        }
    }))
    .await?;
    Ok(names)
}

/// Deletes the CRDs named (e.g. `tcproutes.gateway.networking.k8s.io`; absent ones
/// are fine) and waits until they are gone, objects and all.
pub(crate) async fn delete(client: &Client, names: &[&str]) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    try_join_all(names.iter().map(|name| {
        let api = api.clone();
        async move {
            let Some(crd) = api.get_opt(name).await? else {
                return Ok(());
            };
            api.delete(name, &Default::default()).await?;
            let uid = crd.metadata.uid.unwrap_or_default();
            let gone = await_condition(api, name, conditions::is_deleted(&uid));
            within_timeout(name, "deleted", gone).await
        }
    }))
    .await?;
    Ok(())
}

/// Waits for CRD `name` to be `state` (`wait`), for [`ESTABLISH_TIMEOUT`] at most.
async fn within_timeout<T, E: std::fmt::Display>(
    name: &str,
    state: &str,
    wait: impl Future<Output = Result<T, E>>,
) -> Result<(), Error> {
    let reason = match tokio::time::timeout(ESTABLISH_TIMEOUT, wait).await {
        Ok(Ok(_)) => return Ok(()),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("not {state} after {ESTABLISH_TIMEOUT:?}"),
    };
    Err(Error::CrdWait {
        name: name.to_string(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object}}
";
    const POLICY: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: safe-upgrades}
";

    fn scratch() -> PathBuf {
        let hex = crate::pki::random_hex(4).unwrap();
        let dir = std::env::temp_dir().join(format!("aether-testkit-crds-{hex}"));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn reads_only_crd_documents_of_yaml_files() {
        let dir = scratch();
        std::fs::write(dir.join("b.yaml"), format!("{POLICY}---\n{CRD}---\n")).unwrap();
        std::fs::write(dir.join("a.yaml"), CRD.replace("widgets", "gadgets")).unwrap();
        std::fs::write(dir.join("kustomization.yml"), CRD).unwrap();
        let names: Vec<_> = read(&dir)
            .unwrap()
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect();
        assert_eq!(names, ["gadgets.example.com", "widgets.example.com"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_without_crds_is_an_error() {
        let dir = scratch();
        std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
        assert!(matches!(read(&dir), Err(Error::NoCrds(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_pinned_bundle_has_the_gateway_api_crds() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let dir = runtime.block_on(crate::gateway_api_crd_dir()).unwrap();
        let crds = read(&dir).unwrap();
        let names: Vec<_> = crds
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        for kind in [
            "gatewayclasses",
            "gateways",
            "httproutes",
            "grpcroutes",
            "tlsroutes",
            "referencegrants",
        ] {
            let name = format!("{kind}.gateway.networking.k8s.io");
            assert!(names.contains(&name), "{name} missing from {names:?}");
        }
    }
}
