use super::*;
use envoy_types::pb::envoy::config::route::v3::RouteAction;

fn route(name: &str, cluster: &str) -> Route {
    Route {
        name: name.to_string(),
        action: Some(Action::Route(RouteAction {
            cluster_specifier: Some(ClusterSpecifier::Cluster(cluster.to_string())),
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn vhost(name: &str, routes: Vec<Route>) -> VirtualHost {
    VirtualHost {
        name: name.to_string(),
        domains: vec![name.to_string()],
        routes,
        ..Default::default()
    }
}

fn table(vhosts: Vec<VirtualHost>) -> Resource {
    let rc = RouteConfiguration {
        name: "rt".to_string(),
        virtual_hosts: vhosts,
        ..Default::default()
    };
    Resource::new("rt", ResourceType::Route.type_url(), rc.encode_to_vec())
}

/// Per virtual host, its route names, in order.
fn names(r: &Resource) -> Vec<(String, Vec<String>)> {
    decode(r)
        .unwrap()
        .virtual_hosts
        .iter()
        .map(|v| {
            (
                v.name.clone(),
                v.routes.iter().map(|r| r.name.clone()).collect(),
            )
        })
        .collect()
}

fn held(from: &Resource, keys: &[&str]) -> BTreeMap<String, HeldRoutes> {
    keys.iter()
        .map(|k| (k.to_string(), HeldRoutes::of(from, k).unwrap()))
        .collect()
}

const A: &str = "HTTPRoute/app/a";
const B: &str = "HTTPRoute/app/b";

#[test]
fn a_held_route_goes_back_where_it_was_and_the_rest_goes_on() {
    let old = table(vec![vhost(
        "h",
        vec![
            route("HTTPRoute/app/a/rule/0/match/0", "old-a"),
            route("HTTPRoute/app/b/rule/0/match/0", "b"),
        ],
    )]);
    // b changed its cluster, a changed (Envoy refused it), c is new.
    let new = table(vec![vhost(
        "h",
        vec![
            route("HTTPRoute/app/c/rule/0/match/0", "c"),
            route("HTTPRoute/app/b/rule/0/match/0", "b2"),
            route("HTTPRoute/app/a/rule/0/match/0", "refused"),
        ],
    )]);
    let (spliced, fragments) = splice(&new, &held(&old, &[A]), |_| true).unwrap();
    assert_eq!(
        names(&spliced),
        [(
            "h".to_string(),
            vec![
                "HTTPRoute/app/a/rule/0/match/0".to_string(),
                "HTTPRoute/app/c/rule/0/match/0".to_string(),
                "HTTPRoute/app/b/rule/0/match/0".to_string(),
            ]
        )],
        "a had no route before it: it goes back first; the rest keeps the new order"
    );
    let old_fragments = route::fragments(&decode(&old).unwrap());
    let new_fragments = route::fragments(&decode(&new).unwrap());
    assert_eq!(fragments[A], old_fragments[A], "a is served as it was");
    assert_eq!(fragments[B], new_fragments[B], "b's change goes on");
    assert!(
        spliced
            .references
            .contains(&(ResourceType::Cluster, "old-a".to_string()))
    );
}

#[test]
fn a_held_new_route_is_left_out_and_its_empty_host_with_it() {
    let old = table(vec![vhost(
        "*",
        vec![route("HTTPRoute/app/b/rule/0/match/0", "b")],
    )]);
    let new = table(vec![
        vhost(
            "new.example",
            vec![route("HTTPRoute/app/a/rule/0/match/0", "a")],
        ),
        vhost("*", vec![route("HTTPRoute/app/b/rule/0/match/0", "b")]),
    ]);
    let (spliced, fragments) = splice(&new, &held(&old, &[A]), |_| true).unwrap();
    assert_eq!(names(&spliced), names(&old));
    assert!(!fragments.contains_key(A));
}

#[test]
fn a_held_route_whose_cluster_is_gone_is_left_out() {
    let old = table(vec![vhost(
        "h",
        vec![route("HTTPRoute/app/a/rule/0/match/0", "gone")],
    )]);
    let new = table(vec![vhost(
        "h",
        vec![route("HTTPRoute/app/a/rule/0/match/0", "new")],
    )]);
    let (spliced, _) = splice(&new, &held(&old, &[A]), |c| c != "gone").unwrap();
    assert_eq!(names(&spliced), Vec::<(String, Vec<String>)>::new());
    let (spliced, _) = splice(&new, &held(&old, &[A]), |_| true).unwrap();
    assert_eq!(
        names(&spliced),
        names(&old),
        "with its cluster defined it serves as before"
    );
}

#[test]
fn a_held_route_whose_host_moved_comes_back_with_its_host() {
    let old = table(vec![vhost(
        "old.example",
        vec![route("HTTPRoute/app/a/rule/0/match/0", "a")],
    )]);
    let new = table(vec![vhost(
        "new.example",
        vec![route("HTTPRoute/app/a/rule/0/match/0", "a")],
    )]);
    let (spliced, _) = splice(&new, &held(&old, &[A]), |_| true).unwrap();
    assert_eq!(names(&spliced), names(&old));
}

#[test]
fn a_held_route_of_a_filtered_virtual_host_the_table_lost_is_not_served_unfiltered() {
    let mut filtered = vhost("f", vec![route("HTTPRoute/app/a/rule/0/match/0", "a")]);
    filtered.typed_per_filter_config.insert(
        "edge_ext_authz_x_0".into(),
        envoy_types::pb::google::protobuf::Any::default(),
    );
    let old = table(vec![filtered, vhost("h", vec![])]);
    let new = table(vec![vhost("h", vec![])]);
    let (spliced, _) = splice(&new, &held(&old, &[A]), |_| true).unwrap();
    assert_eq!(names(&spliced), [("h".to_string(), vec![])]);
}
