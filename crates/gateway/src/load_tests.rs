//! Tests of `load.rs`: error lines and objects, parts, unknown fields.

use super::*;
use crate::store::types::*;

fn load(text: &str) -> Result<Store, LoadError> {
    let mut store = Store::default();
    store.add_yaml("gateways.yaml", text).map(|_| store)
}

const GATEWAY: &str = "\
# leading comment
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: web
spec:
  gatewayClassName: aether
  listeners:
  - name: http
    port: 80
    protocol: HTTP
";

#[test]
fn cluster_trust_bundles_load_at_v1beta1_and_v1alpha1_without_a_namespace() {
    let bundle = |version: &str, name: &str| {
        format!(
            "apiVersion: certificates.k8s.io/{version}\nkind: ClusterTrustBundle\nmetadata: {{name: {name}}}\nspec:\n  trustBundle: pem\n"
        )
    };
    let text = format!(
        "{}---\n{}",
        bundle("v1beta1", "new"),
        bundle("v1alpha1", "old")
    );
    let store = load(&text).unwrap();
    let names: Vec<_> = store
        .all::<ClusterTrustBundle>()
        .keys()
        .map(|k| (k.namespace.as_str(), k.name.as_str()))
        .collect();
    assert_eq!(names, [("", "new"), ("", "old")]);
}

const XBACKEND: &str = "\
apiVersion: gateway.networking.x-k8s.io/v1alpha1
kind: XBackend
metadata:
  name: api
  namespace: apps
spec:
  type: ExternalHostname
  externalHostname:
    hostname: api.example.com
  port:
    number: 443
  protocol: HTTP2
  tls:
    mode: ServerOnly
    validation:
      hostname: api.example.com
      wellKnownCACertificates: System
";

#[test]
fn xbackends_load_at_x_k8s_v1alpha1_and_refuse_unknown_fields() {
    let store = load(XBACKEND).unwrap();
    let x: &XBackend = store.get("apps", "api").expect("loaded");
    assert_eq!(x.spec.port.number, Some(443));
    let err = load(&XBACKEND.replace("  protocol:", "  protocl: HTTP2\n  protocol:")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "gateways.yaml:12: XBackend apps/api: unknown field `spec.protocl`"
    );
    // The group is gateway.networking.x-k8s.io, not the standard one.
    let wrong = XBACKEND.replace("x-k8s.io/v1alpha1", "k8s.io/v1");
    assert!(matches!(load(&wrong), Err(LoadError::UnknownKind { .. })));
}

#[test]
fn loads_multi_document_files_and_skips_empty_documents() {
    let text =
        format!("{GATEWAY}---\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: apps\n");
    let mut store = Store::default();
    assert_eq!(store.add_yaml("a.yaml", &text), Ok(2));
    assert!(store.get::<Gateway>("default", "web").is_some());
    assert!(store.get::<Namespace>("", "apps").is_some());
}

#[test]
fn malformed_yaml_names_file_and_line() {
    let text = format!("{GATEWAY}---\napiVersion: v1\nkind: Service\nmetadata:\n  name: [oops\n");
    let err = load(&text).unwrap_err();
    assert!(matches!(err, LoadError::Syntax { .. }), "{err:?}");
    let msg = err.to_string();
    // The flow sequence opened on line 17 never closes.
    assert_eq!(msg, "gateways.yaml:17: invalid YAML: unclosed bracket '['");
}

#[test]
fn unknown_kind_names_object_and_line() {
    let text = "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n---\n\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: apps\n";
    let err = load(text).unwrap_err();
    assert_eq!(
        err.to_string(),
        "gateways.yaml:7: Widget apps/w: unsupported kind `Widget` of apiVersion `example.com/v1`"
    );
}

#[test]
fn invalid_field_type_names_line_and_field() {
    let text = GATEWAY.replace("port: 80", "port: eighty");
    let err = load(&text).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("gateways.yaml:11: Gateway default/web: "),
        "{msg}"
    );
    assert!(
        msg.contains("spec.listeners[0].port: invalid type"),
        "{msg}"
    );
}

#[test]
fn unknown_field_is_an_error_not_silence() {
    let text = GATEWAY.replace("  listeners:", "  listner: []\n  listeners:");
    let err = load(&text).unwrap_err();
    assert_eq!(
        err.to_string(),
        "gateways.yaml:9: Gateway default/web: unknown field `spec.listner`"
    );
}

#[test]
fn an_object_without_a_name_is_an_error() {
    let text = GATEWAY.replace("  name: web\n", "  labels: {a: b}\n");
    assert_eq!(
        load(&text).unwrap_err().to_string(),
        "gateways.yaml:3: Gateway <unnamed>: `metadata.name` is required"
    );
    let text = GATEWAY.replace("name: web", "name: \"\"");
    assert!(load(&text).is_err());
}

#[test]
fn a_name_the_api_server_refuses_is_refused() {
    // Two tenants whose names joined by `_` would read the same.
    let service = |ns: &str, name: &str| {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: \"{name}\"\n  namespace: {ns}\nspec: {{}}\n"
        )
    };
    assert_eq!(
        load(&service("a", "b_c")).unwrap_err().to_string(),
        "gateways.yaml:4: Service a/b_c: `metadata.name` is not a valid name: a DNS-1035 \
             label must consist of lower case alphanumeric characters or '-', start with an \
             alphabetic character, end with an alphanumeric character, and be at most 63 \
             characters long"
    );
    let err = load(&service("a_b", "c")).unwrap_err().to_string();
    assert!(
        err.starts_with("gateways.yaml:5: Service a_b/c: `metadata.namespace` is not a valid name"),
        "{err}"
    );
    // Control characters never reach a log line as they are.
    let err = load(&service("a", "x\\u001b[31m\\u0007"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("Service a/x\\u{1b}[31m\\u{7}:"), "{err}");
    assert!(!err.chars().any(char::is_control), "{err:?}");
    let route = GATEWAY.replace("name: web", "name: Web/1");
    assert!(
        load(&route)
            .unwrap_err()
            .to_string()
            .contains("RFC 1123 subdomain")
    );
}

#[test]
fn a_bad_name_is_found_on_its_line_under_metadata() {
    // A `name:` in spec before metadata, or metadata after spec: the line is
    // the one of `metadata.name` (`metadata.namespace`) all the same.
    let spec_first = "\
apiVersion: v1
kind: Service
spec:
  ports:
  - name: http
    port: 80
metadata:
  labels:
    name: fine
  namespace: ok
  name: b_c
";
    let err = load(spec_first).unwrap_err();
    assert_eq!(err.line(), 11, "{err}");
    assert!(
        err.to_string()
            .starts_with("gateways.yaml:11: Service ok/b_c: `metadata.name`")
    );
    let bad_namespace = spec_first
        .replace("b_c", "c")
        .replace("namespace: ok", "namespace: a_b");
    let err = load(&bad_namespace).unwrap_err();
    assert_eq!(err.line(), 10, "{err}");
    // Flow style: the metadata line itself.
    let flow = "apiVersion: v1\nkind: Service\nspec: {ports: [{name: http, port: 80}]}\n\
                metadata: {name: b_c}\n";
    assert_eq!(load(flow).unwrap_err().line(), 4);
}

#[test]
fn every_bad_object_of_a_file_is_reported() {
    let service = |name: &str| {
        format!("---\napiVersion: v1\nkind: Service\nmetadata:\n  name: \"{name}\"\nspec: {{}}\n")
    };
    let text = [
        service("a_b"),
        service("good"),
        service("C D"),
        service("good"),
    ]
    .concat();
    let mut store = Store::default();
    let err = store.add_file("two.yaml", &text).unwrap_err();
    let lines = err.lines();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert!(
        lines[0].starts_with("two.yaml:5: Service default/a_b: `metadata.name`"),
        "{lines:#?}"
    );
    assert!(
        lines[1].starts_with("two.yaml:17: Service default/C D: `metadata.name`"),
        "{lines:#?}"
    );
    assert_eq!(
        lines[2],
        "two.yaml:20: Service default/good: defined twice in this file (first at line 8)"
    );
    assert!(store.is_empty(), "nothing from a bad file is added");
    // add_yaml says the first of them.
    assert_eq!(
        store.add_yaml("two.yaml", &text).unwrap_err(),
        err.errors[0]
    );
    // Many bad objects: the first SHOWN, then how many more.
    let many: String = (0..FileErrors::SHOWN + 5)
        .map(|i| service(&format!("s_{i}")))
        .collect();
    let lines = store.add_file("many.yaml", &many).unwrap_err().lines();
    assert_eq!(lines.len(), FileErrors::SHOWN + 1);
    assert_eq!(
        lines[FileErrors::SHOWN],
        "many.yaml: 5 more problems not shown"
    );
}

#[test]
fn an_endpoint_address_that_is_not_an_ip_of_its_type_is_refused() {
    let slice = |ty: &str, address: &str| {
        format!(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: s}}\n\
             addressType: {ty}\nendpoints:\n- conditions: {{ready: true}}\n  addresses: [\"{address}\"]\n"
        )
    };
    assert!(load(&slice("IPv4", "10.0.0.1")).is_ok());
    assert!(load(&slice("IPv6", "fd00::1")).is_ok());
    assert!(load(&slice("FQDN", "backend.example")).is_ok());
    let err = load(&slice("IPv4", "127.0.0.1*.")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "gateways.yaml:7: EndpointSlice default/s: endpoints[0].addresses[0] \"127.0.0.1*.\" \
         is not an IPv4 address"
    );
    assert!(load(&slice("IPv6", "10.0.0.1")).is_err());
}

#[test]
fn the_same_object_twice_in_a_file_is_an_error() {
    let text = format!("{GATEWAY}---\n{GATEWAY}");
    assert_eq!(
        load(&text).unwrap_err().to_string(),
        "gateways.yaml:16: Gateway default/web: defined twice in this file (first at line 3)"
    );
}

#[test]
fn hostile_text_is_refused_before_it_is_parsed() {
    let deep = format!("{GATEWAY}---\nkind: {}\n", "[".repeat(100_000));
    let err = load(&deep).unwrap_err();
    assert!(matches!(err, LoadError::Refused { line: 14, .. }), "{err}");
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        bomb.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    let err = load(&bomb).unwrap_err();
    assert!(err.to_string().contains("aliases expand"), "{err}");
}

/// `n` Services, one per document, each 6 lines long (line 1 first).
fn services(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!("---\napiVersion: v1\nkind: Service\nmetadata:\n  name: s{i}\nspec: {{}}\n")
        })
        .collect()
}

/// What each part read: (line, kind, key) per object, or its first error.
fn outcome(parts: Vec<Part>) -> Vec<Result<Vec<(usize, String)>, String>> {
    parts
        .into_iter()
        .map(|p| match p.errors.first() {
            Some(e) => Err(e.to_string()),
            None => Ok(p
                .objects
                .iter()
                .map(|(line, o)| (*line, o.describe()))
                .collect()),
        })
        .collect()
}

fn flat(parts: Vec<Result<Vec<(usize, String)>, String>>) -> Result<Vec<(usize, String)>, String> {
    let mut all = Vec::new();
    for p in parts {
        all.extend(p?);
    }
    Ok(all)
}

#[test]
fn a_file_read_in_parts_reads_as_it_does_whole() {
    let text = services(300);
    let whole = flat(outcome(read_parts("a.yaml", &text, 1)));
    let parts = outcome(read_parts("a.yaml", &text, 4));
    assert_eq!(parts.len(), 4, "four parts, each on a thread");
    assert!(
        parts
            .iter()
            .all(|p| p.as_ref().is_ok_and(|o| !o.is_empty()))
    );
    let parts = flat(parts);
    assert_eq!(parts, whole);
    let objects = whole.expect("the file loads");
    assert_eq!(objects.len(), 300);
    assert_eq!(
        objects[299],
        (1 + 299 * 6 + 1, "Service default/s299".to_string())
    );
}

#[test]
fn an_error_in_a_later_part_names_its_line_in_the_file() {
    // Line 1 + 250*6 is the `---` of document 250; its `kind` is line +2.
    let text = format!(
        "{}---\napiVersion: v1\nkind: Bogus\nmetadata:\n  name: x\n{}",
        services(250),
        services(50)
    );
    let whole = flat(outcome(read_parts("a.yaml", &text, 1))).unwrap_err();
    let parts = flat(outcome(read_parts("a.yaml", &text, 3))).unwrap_err();
    assert_eq!(parts, whole);
    assert!(whole.starts_with("a.yaml:1502: "), "{whole}");
}

#[test]
fn an_alias_bomb_in_a_later_part_is_refused() {
    let mut bomb = String::from("---\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        bomb.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    let text = format!("{}{bomb}", services(400));
    // The bomb's document starts at line 2401; a part has less budget than
    // the whole file, so it may stop a few lines sooner, never outside it.
    for parts in [1, 4] {
        let err = flat(outcome(read_parts("a.yaml", &text, parts))).unwrap_err();
        let line = err["a.yaml:".len()..].split(':').next().unwrap_or_default();
        let line: usize = line.parse().expect("a line number");
        assert!((2402..2412).contains(&line), "{err}");
        assert!(err.contains("aliases expand"), "{err}");
    }
    // A file large enough to be read in parts is refused all the same.
    let big = format!("{}{bomb}", services(PARALLEL_FROM_BYTES / 60));
    assert!(big.len() >= PARALLEL_FROM_BYTES);
    let err = load(&big).unwrap_err();
    assert!(err.to_string().contains("aliases expand"), "{err}");
}

#[test]
fn parts_share_the_file_alias_budget_and_spend_no_more() {
    // Two valid EndpointSlices, each expanding through an alias to ~60%
    // of the file's budget: read whole, the second refuses the file; read
    // in two parts, so must one (a part may spend only its share: were it
    // given the whole budget, each part would pass).
    let heavy = |i: usize| {
        let list = vec!["\"10.0.0.1\""; 100].join(", ");
        let aliases = format!("- addresses: *a{i}\n").repeat(199);
        format!(
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: e{i}}}\naddressType: IPv4\nendpoints:\n- addresses: &a{i} [{list}]\n{aliases}"
        )
    };
    let text = format!("{}{}{}{}", services(20), heavy(0), services(20), heavy(1));
    let budget = crate::yaml_guard::expansion_budget(text.len());
    let one = 200 * 101;
    assert!(one < budget && 2 * one > budget, "budget {budget}");
    for parts in [1, 2] {
        let err = flat(outcome(read_parts("a.yaml", &text, parts))).unwrap_err();
        assert!(err.contains("aliases expand"), "{parts} parts: {err}");
    }
}

#[test]
fn a_duplicate_across_parts_is_found() {
    let text = format!("{}{}", services(200), services(1));
    let err = load_parts(&text, 4).unwrap_err();
    assert!(err.starts_with("a.yaml:1202: "), "{err}");
    assert!(err.ends_with("(first at line 2)"), "{err}");
}

/// `Store::add_yaml`'s checks over [`read_parts`] in `parts` parts.
fn load_parts(text: &str, parts: usize) -> Result<usize, String> {
    let mut seen = BTreeMap::new();
    let mut n = 0;
    for part in read_parts("a.yaml", text, parts) {
        if let Some(e) = part.errors.first() {
            return Err(e.to_string());
        }
        for (line, object) in part.objects {
            if let Some(first) = seen.insert((object.kind, object.key.clone()), line) {
                return Err(LoadError::Duplicate {
                    file: "a.yaml".into(),
                    line,
                    object: object.describe(),
                    first,
                }
                .to_string());
            }
            n += 1;
        }
    }
    Ok(n)
}

#[test]
fn a_bad_document_adds_nothing_from_the_file() {
    let text = format!("{GATEWAY}---\napiVersion: v1\nkind: Bogus\nmetadata:\n  name: x\n");
    let mut store = Store::default();
    assert!(store.add_yaml("a.yaml", &text).is_err());
    assert!(store.is_empty());
}

mod empty_values {
    use super::*;

    #[test]
    fn empty_collections_are_not_unknown_fields() {
        let text = "\
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: s
  labels: {}
  annotations: {}
addressType: IPv4
ports: []
endpoints: []
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: r
spec:
  hostnames: []
  parentRefs: []
  rules: []
---
apiVersion: v1
kind: Secret
metadata:
  name: s
type: kubernetes.io/tls
data:
  tls.crt: aGVsbG8=
stringData: {}
";
        let mut store = Store::default();
        assert_eq!(store.add_yaml("e.yaml", text), Ok(3));
    }
}

/// Unknown fields in one pass ([`crate::lenient::decode_noting_unknown`])
/// against the slow way it replaced: decode, serialize back, and compare.
mod one_pass {
    use super::*;
    use proptest::prelude::*;

    /// Paths (`spec.listeners[0].listner`) present in `input` but dropped by the
    /// typed round trip. Null values are ignored: they serialize as absent.
    fn round_trip_unknown(input: &Value, typed: &Value, path: &str, out: &mut Vec<String>) {
        match (input, typed) {
            (Value::Mapping(inp), Value::Mapping(out_map)) => {
                for (k, v) in inp {
                    if v.is_null() {
                        continue;
                    }
                    let key = match k {
                        Value::String(s) => s.clone(),
                        other => serde_norway::to_string(other)
                            .unwrap_or_default()
                            .trim()
                            .to_string(),
                    };
                    let sub = if path.is_empty() {
                        key.clone()
                    } else {
                        format!("{path}.{key}")
                    };
                    match out_map.get(k) {
                        Some(t) => round_trip_unknown(v, t, &sub, out),
                        None => out.push(sub),
                    }
                }
            }
            (Value::Sequence(inp), Value::Sequence(out_seq)) => {
                for (i, (v, t)) in inp.iter().zip(out_seq).enumerate() {
                    round_trip_unknown(v, t, &format!("{path}[{i}]"), out);
                }
            }
            (Value::Tagged(t), other) => round_trip_unknown(&t.value, other, path, out),
            _ => {}
        }
    }

    fn both<T: DeserializeOwned + Serialize>(value: &Value) -> (Vec<String>, Vec<String>) {
        let mut fast = value.clone();
        let Ok((_, one_pass)) = crate::lenient::decode_noting_unknown::<T>(&mut fast) else {
            return (vec![], vec![]);
        };
        let mut slow = value.clone();
        let typed: T = crate::lenient::decode(&mut slow).unwrap();
        let mut old = Vec::new();
        round_trip_unknown(
            &slow,
            &serde_norway::to_value(&typed).unwrap(),
            "",
            &mut old,
        );
        (one_pass, old)
    }

    /// Both ways over one document, by its kind; `None` for kinds not read here.
    fn compare(value: &Value) -> Option<(Vec<String>, Vec<String>)> {
        let kind = value.get("kind")?.as_str()?.to_string();
        let mut value = value.clone();
        if let Ok(kind) = kind.parse() {
            default_older_versions(kind, &mut value);
        }
        if let Some(m) = value.as_mapping_mut() {
            m.remove("status");
        }
        Some(match kind.as_str() {
            "GatewayClass" => both::<GatewayClass>(&value),
            "Gateway" => both::<Gateway>(&value),
            "HTTPRoute" => both::<HttpRoute>(&value),
            "GRPCRoute" => both::<GrpcRoute>(&value),
            "TLSRoute" => both::<TlsRoute>(&value),
            "TCPRoute" => both::<TcpRoute>(&value),
            "UDPRoute" => both::<UdpRoute>(&value),
            "ReferenceGrant" => both::<ReferenceGrant>(&value),
            "BackendTLSPolicy" => both::<BackendTlsPolicy>(&value),
            "ListenerSet" => both::<ListenerSet>(&value),
            "Service" => both::<Service>(&value),
            "Secret" => both::<Secret>(&value),
            "ConfigMap" => both::<ConfigMap>(&value),
            "Namespace" => both::<Namespace>(&value),
            "EndpointSlice" => both::<EndpointSlice>(&value),
            "ClusterTrustBundle" => both::<ClusterTrustBundle>(&value),
            "XBackend" => both::<XBackend>(&value),
            _ => return None,
        })
    }

    /// Every document of every golden case.
    fn golden_documents() -> &'static [Value] {
        static DOCS: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
        DOCS.get_or_init(read_golden_documents)
    }

    fn read_golden_documents() -> Vec<Value> {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata");
        let mut dirs: Vec<_> = std::fs::read_dir(root)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        dirs.sort();
        dirs.iter()
            .filter_map(|d| std::fs::read_to_string(d.join("in.yaml")).ok())
            .flat_map(|text| {
                crate::yaml_guard::read(&text)
                    .map(Result::unwrap)
                    .filter_map(|d| serde_norway::from_str::<Value>(d.text).ok())
                    .filter(|v| !v.is_null())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The mapping nodes of `value`, as paths of keys and indices.
    fn mappings(value: &Value, at: Vec<Value>, out: &mut Vec<Vec<Value>>) {
        match value {
            Value::Mapping(m) => {
                out.push(at.clone());
                for (k, v) in m {
                    let mut next = at.clone();
                    next.push(k.clone());
                    mappings(v, next, out);
                }
            }
            Value::Sequence(s) => {
                for (i, v) in s.iter().enumerate() {
                    let mut next = at.clone();
                    next.push(Value::from(i as u64));
                    mappings(v, next, out);
                }
            }
            _ => {}
        }
    }

    fn node_mut<'a>(value: &'a mut Value, path: &[Value]) -> &'a mut Value {
        path.iter().fold(value, |v, step| match step {
            Value::Number(n) => &mut v[n.as_u64().unwrap() as usize],
            key => v.get_mut(key).unwrap(),
        })
    }

    #[test]
    fn the_golden_inputs_have_the_same_unknown_fields_both_ways() {
        let docs = golden_documents();
        assert!(docs.len() > 300, "{} documents", docs.len());
        for doc in docs {
            if let Some((one_pass, old)) = compare(doc) {
                assert_eq!(one_pass, old, "{}", serde_norway::to_string(doc).unwrap());
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        /// A field nobody knows, added anywhere in a golden object (or null
        /// there, which is absent), is found the same both ways, by its path.
        #[test]
        fn an_added_field_is_found_by_both(pick in any::<prop::sample::Index>(),
                                           at in any::<prop::sample::Index>(),
                                           null in any::<bool>()) {
            let docs = golden_documents();
            let mut doc = docs[pick.index(docs.len())].clone();
            let mut nodes = Vec::new();
            mappings(&doc, vec![], &mut nodes);
            let path = nodes[at.index(nodes.len())].clone();
            let added = if null { Value::Null } else { Value::from("x") };
            node_mut(&mut doc, &path).as_mapping_mut().unwrap().insert("zzUnknown".into(), added);
            if let Some((one_pass, old)) = compare(&doc) {
                prop_assert_eq!(&one_pass, &old);
                let found = one_pass.iter().any(|p| p.ends_with("zzUnknown"));
                // Some maps take any key (labels, annotations, Secret data).
                prop_assert!(!found || !null, "a null field is absent: {:?}", one_pass);
            }
        }
    }
}
