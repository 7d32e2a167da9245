use super::plan::*;
use super::*;
use serde_json::json;

fn mk_xbackend(name: &str, uid: &str, selector: serde_json::Value, port: i32) -> XBackend {
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.x-k8s.io/v1alpha1",
        "kind": "XBackend",
        "metadata": {"namespace": "app", "name": name, "uid": uid},
        "spec": {"type": "EndpointSelector", "port": {"number": port},
                 "endpointSelector": {"matchLabels": selector}},
    }))
    .unwrap()
}

fn mk_external(name: &str, uid: &str) -> XBackend {
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.x-k8s.io/v1alpha1",
        "kind": "XBackend",
        "metadata": {"namespace": "app", "name": name, "uid": uid},
        "spec": {"type": "ExternalHostname", "port": {"number": 443},
                 "externalHostname": {"hostname": "api.example.com"}},
    }))
    .unwrap()
}

/// `x`'s desired Service as the API server would hold it: named, versioned,
/// created at `created` (seconds), with a label of someone else.
fn mk_existing(x: &XBackend, name: &str, created: i64) -> Service {
    let mut svc = desired(x).expect("wanted");
    svc.metadata.name = Some(name.into());
    svc.metadata.uid = Some(format!("svc-{name}"));
    svc.metadata.resource_version = Some("5".into());
    svc.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(created).unwrap(),
    ));
    svc.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("team".into(), "payments".into());
    svc
}

#[test]
fn the_service_is_headless_selects_the_pods_and_is_owned_by_the_xbackend() {
    let x = mk_xbackend("pay", "u1", json!({"app": "pay", "tier": "api"}), 8080);
    let svc = serde_json::to_value(desired(&x).unwrap()).unwrap();
    assert_eq!(
        svc,
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "generateName": "pay-",
                "namespace": "app",
                "labels": {"app.kubernetes.io/managed-by": "aether-edge",
                           "gateway.aether.io/xbackend": "pay"},
                "ownerReferences": [{"apiVersion": "gateway.networking.x-k8s.io/v1alpha1",
                    "kind": "XBackend", "name": "pay", "uid": "u1",
                    "controller": true, "blockOwnerDeletion": false}],
            },
            "spec": {
                "clusterIP": "None",
                "selector": {"app": "pay", "tier": "api"},
                "ports": [{"name": "p-8080", "port": 8080, "targetPort": 8080, "protocol": "TCP"}],
            },
        })
    );
    assert_eq!(desired(&mk_external("ext", "u2")), None);
}

#[test]
fn names_and_labels_stay_within_limits() {
    assert_eq!(generate_name("web.v2"), "web-v2-");
    assert_eq!(generate_name("1st"), "xb-1st-");
    let long = "a".repeat(70);
    let prefix = generate_name(&long);
    assert_eq!(prefix.len(), 58, "63 with the 5 random characters");
    let dashed = format!("{}-b", "a".repeat(56));
    assert_eq!(generate_name(&dashed), format!("{}-", "a".repeat(56)));
    // A name too long for a label value is not one.
    let x = mk_xbackend(&"b".repeat(64), "u1", json!({"app": "b"}), 80);
    let labels = desired(&x).unwrap().metadata.labels.unwrap();
    assert_eq!(labels.keys().collect::<Vec<_>>(), [MANAGED_BY_LABEL]);
}

#[test]
fn one_service_is_created_and_none_again_once_it_exists() {
    let x = mk_xbackend("pay", "u1", json!({"app": "pay"}), 8080);
    let got = plan([&x], []);
    assert!(matches!(&got[..], [Action::Create { .. }]), "{got:?}");
    let existing = mk_existing(&x, "pay-abcde", 1);
    assert_eq!(plan([&x], [&existing]), []);
}

#[test]
fn a_changed_selector_or_port_replaces_ours_and_keeps_what_others_set() {
    let before = mk_xbackend("pay", "u1", json!({"app": "pay"}), 8080);
    let existing = mk_existing(&before, "pay-abcde", 1);
    let after = mk_xbackend("pay", "u1", json!({"app": "pay", "v": "2"}), 9090);
    let got = plan([&after], [&existing]);
    let [Action::Replace { service, .. }] = &got[..] else {
        panic!("{got:?}")
    };
    assert_eq!(service.metadata.name.as_deref(), Some("pay-abcde"));
    assert_eq!(service.metadata.resource_version.as_deref(), Some("5"));
    assert_eq!(
        service.metadata.labels.as_ref().unwrap()["team"],
        "payments"
    );
    let spec = service.spec.as_ref().unwrap();
    assert_eq!(spec.selector.as_ref().unwrap().len(), 2);
    let ports = spec.ports.as_ref().unwrap();
    assert_eq!((ports.len(), ports[0].port), (1, 9090));
}

#[test]
fn a_second_service_is_deleted_and_the_oldest_kept() {
    let x = mk_xbackend("pay", "u1", json!({"app": "pay"}), 8080);
    let (old, new) = (
        mk_existing(&x, "pay-zzzzz", 1),
        mk_existing(&x, "pay-aaaaa", 2),
    );
    let got = plan([&x], [&new, &old]);
    assert_eq!(
        got,
        [Action::Delete {
            xbackend: ObjectRef::new("app", "pay"),
            name: "pay-aaaaa".into(),
            uid: Some("svc-pay-aaaaa".into()),
        }]
    );
}

#[test]
fn a_service_whose_xbackend_is_gone_or_external_is_deleted_and_anothers_is_not() {
    let x = mk_xbackend("pay", "u1", json!({"app": "pay"}), 8080);
    let ours = mk_existing(&x, "pay-abcde", 1);
    let mut theirs = ours.clone();
    theirs.metadata.name = Some("pay-other".into());
    theirs.metadata.labels = Some(BTreeMap::from([("app".into(), "pay".into())]));
    let gone = plan(Vec::<&XBackend>::new(), [&ours, &theirs]);
    assert!(
        matches!(&gone[..], [Action::Delete { name, .. }] if name == "pay-abcde"),
        "{gone:?}"
    );
    let external = mk_external("pay", "u1");
    assert_eq!(plan([&external], [&ours, &theirs]), gone);
    // Re-created under the same name: a new uid, a new Service.
    let again = mk_xbackend("pay", "u2", json!({"app": "pay"}), 8080);
    let got = plan([&again], [&ours]);
    assert!(
        matches!(&got[..], [Action::Create { .. }, Action::Delete { .. }]),
        "{got:?}"
    );
}

#[test]
fn our_writes_stand_until_the_store_shows_them() {
    let x = mk_xbackend("pay", "u1", json!({"app": "pay"}), 8080);
    let created = mk_existing(&x, "pay-abcde", 1);
    let t0 = Instant::now();
    let mut recent = Recent::default();
    recent.record(created.clone(), None, t0);
    // Not yet in the store: no second create.
    let seen = recent.overlay([], t0);
    assert_eq!(plan([&x], &seen), []);
    // In the store: the store speaks for it.
    recent.overlay([&created], t0);
    assert!(recent.is_empty());
    // Never shown (deleted at once): created again once it expires.
    recent.record(created, None, t0);
    assert!(recent.overlay([], t0 + RECENT_TTL).is_empty());
    // A replace stands while the store shows the version it replaced.
    let mut old = mk_existing(&x, "pay-abcde", 1);
    let mut replaced = old.clone();
    replaced.metadata.resource_version = Some("6".into());
    recent.record(replaced, Some("5".into()), t0);
    let seen = recent.overlay([&old], t0);
    assert_eq!(seen[0].metadata.resource_version.as_deref(), Some("6"));
    old.metadata.resource_version = Some("7".into());
    let seen = recent.overlay([&old], t0);
    assert_eq!(seen[0].metadata.resource_version.as_deref(), Some("7"));
    assert!(recent.is_empty());
}
