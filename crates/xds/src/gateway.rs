//! One Gateway's share of a snapshot: its listeners, route tables and
//! secrets, the members and parts that say which objects read what, and the
//! fragments of the resources its objects share.
//!
//! ```text
//!  ir::Gateway ─► each port ─► listener (LDS) ─┬─ its TLS chains' secrets (SDS)
//!                                              └─ the route tables it names (RDS)
//!                                                   └─ the clusters they forward to
//!              ─► its listeners' authorization servers (the Gateway's own clusters)
//! ```

use crate::access_log::AccessLog;
use crate::action::Scheme;
use crate::parts::{OWN, ObjectParts, Part, RouteParts};
use crate::proxy_protocol::ProxyProtocol;
use crate::route_cache::{self, EncodedTable, RouteCount};
use crate::snapshot::{Resource, ResourceType};
use crate::table_parts::{self, TableShares};
use crate::{ext_authz, listener, secret};
use aether_ir as ir;
use prost::Message;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Each object's fragment of one shared resource, by object key.
type Fragment = crate::parts::KeyHashes;

/// What a Gateway's build reads of a cluster it names: `None` when the IR
/// does not define it, else what the cluster references (its endpoints and
/// secrets).
pub(crate) type ClusterReads = Option<Arc<[(ResourceType, String)]>>;

/// A resource and the name it goes by, as members and parts key it.
type Named = (ResourceType, String);

/// What one Gateway adds to a snapshot: its listeners and route tables, its
/// members, its and its routes' parts (not yet fingerprinted), the fragments
/// of its shared resources.
#[derive(Debug, Default)]
pub(crate) struct GatewayBuild {
    pub(crate) resources: Vec<(ResourceType, Resource)>,
    /// Shared with the snapshots built from it.
    pub(crate) members: Arc<BTreeSet<Named>>,
    /// The members as the build meets them (some twice), made a set at its
    /// end: one sort of thousands of names, not thousands of inserts.
    met: Vec<Named>,
    pub(crate) own: ObjectParts,
    pub(crate) routes: RouteParts,
    /// Per resource the Gateway's objects share, each object's fragment.
    pub(crate) fragments: Vec<(Named, Arc<Fragment>)>,
    /// Every cluster name its routes forward to, and what it read of it.
    pub(crate) clusters_named: BTreeMap<String, ClusterReads>,
    /// Its route tables encoded route by route, by name: what the next build
    /// of the Gateway takes unchanged routes' encodings from.
    pub(crate) tables: BTreeMap<String, EncodedTable>,
    /// Its route tables' route keys' parts, by table name: what the next
    /// build takes unchanged keys' parts from.
    pub(crate) shares: BTreeMap<String, TableShares>,
    /// The route keys whose parts merge more than one share, each merge.
    pub(crate) merges: BTreeMap<String, Vec<table_parts::Merge>>,
    /// IR routes whose encodings this build took from the one before, and
    /// those it encoded.
    pub(crate) route_count: RouteCount,
    /// Route keys' shares of its tables made anew (not taken from before).
    pub(crate) shares_made: usize,
}

/// What a Gateway's build reads besides the Gateway.
struct Inputs<'a> {
    /// Which clusters the IR defines, and what each references.
    known: &'a dyn Fn(&str) -> ClusterReads,
    /// The clusters whose definitions moved since the build before.
    moved: &'a BTreeSet<String>,
    log: AccessLog,
    proxy: ProxyProtocol,
    /// The build before, and the Gateway it was built from.
    before: Option<(&'a ir::Gateway, &'a GatewayBuild)>,
}

/// What the listeners built so far have added that the next one must not add
/// again, or that is added once they are all built.
#[derive(Default)]
struct Seen {
    secrets_added: BTreeSet<String>,
    /// The authorization servers of listeners' pre-routing filters: the Gateway's own.
    auth_clusters: BTreeSet<String>,
}

/// One Gateway's resources; `known` says which clusters the IR defines, and
/// what each references; `before` is an earlier build of it (and the IR it
/// was built from) to take unchanged routes' encodings and parts from, and
/// `moved` the clusters whose definitions moved since (none of those it
/// names did while `before` was kept).
pub(crate) fn build_gateway(
    gw: &ir::Gateway,
    known: &dyn Fn(&str) -> ClusterReads,
    moved: &BTreeSet<String>,
    log: AccessLog,
    proxy: ProxyProtocol,
    before: Option<(&ir::Gateway, &GatewayBuild)>,
) -> GatewayBuild {
    let inputs = Inputs {
        known,
        moved,
        log,
        proxy,
        before,
    };
    let mut out = GatewayBuild::default();
    let mut seen = Seen::default();
    for port in &gw.ports {
        out.add_listener(gw, port, &inputs, &mut seen);
    }
    for cluster in seen.auth_clusters {
        out.own_auth_cluster(cluster, known);
    }
    let members: BTreeSet<Named> = std::mem::take(&mut out.met).into_iter().collect();
    // The same members as before: the same set, so that the snapshot keeps
    // the Gateway's hash without comparing them again.
    out.members = match before {
        Some((_, b)) if *b.members == members => b.members.clone(),
        _ => Arc::new(members),
    };
    out
}

impl GatewayBuild {
    /// Its resources, each with its type.
    pub(crate) fn resources(&self) -> impl Iterator<Item = (ResourceType, &Resource)> {
        self.resources.iter().map(|(ty, r)| (*ty, r))
    }

    /// A resource of the Gateway's.
    fn member(&mut self, named: Named) {
        self.met.push(named);
    }

    fn add(&mut self, ty: ResourceType, name: &str, encoded: Vec<u8>, clusters: Vec<String>) {
        let references = clusters.into_iter().map(|c| (ResourceType::Cluster, c));
        self.resources.push((
            ty,
            Resource::new(name, ty.type_url(), encoded).with_references(references),
        ));
    }

    /// A port's listener, and everything it serves: its secrets, its route
    /// tables, the clusters they forward to.
    fn add_listener(
        &mut self,
        gw: &ir::Gateway,
        port: &ir::Port,
        inputs: &Inputs,
        seen: &mut Seen,
    ) {
        let known = inputs.known;
        let listener = listener::listener(gw, port, inputs.log, inputs.proxy);
        // Envoy rejects a listener without filter chains, and a rejected LDS
        // update takes every other listener down with it. A port with nothing
        // to serve (say, every HTTPS listener lost its certificate, which the
        // status says) is simply not bound.
        if listener.filter_chains.is_empty() && listener.udp_listener_config.is_none() {
            return;
        }
        let lds = (ResourceType::Listener, port.listener_name.clone());
        let mut of_listener = listener::fragments(port, &listener);
        let own_share: Arc<str> = of_listener.get(OWN).cloned().unwrap_or_else(|| "".into());
        self.require_listener_fragments(&lds, &of_listener);
        // Its connection managers' authorization servers: Envoy refuses an
        // ext_authz filter whose gRPC cluster it does not have.
        let of_port = ext_authz::clusters(port).filter(|c| known(c).is_some());
        let of_port: BTreeSet<String> = of_port.collect();
        seen.auth_clusters.extend(of_port.iter().cloned());
        let references: Vec<String> = l4_clusters(port, known).chain(of_port).collect();
        // Not among its references: Envoy asks for a listener's secrets only
        // once it has the listener, and warms it until they arrive.
        self.add(lds.0, &lds.1, listener.encode_to_vec(), references);
        self.member(lds.clone());
        let secrets = self.add_chain_secrets(port, &mut seen.secrets_added);
        for f in forwards(port) {
            for b in &f.backends {
                if !f.route.is_empty() {
                    self.use_cluster(known, &f.route, &b.cluster);
                }
            }
        }
        // Every route served on the listener as it is now is served with the
        // Gateway's certificates as they are now: the routes of its tables
        // (their shares say so), and those owning its chains.
        let gateway_secrets = secrets.get(OWN).cloned().unwrap_or_default();
        for key in of_listener.keys().filter(|&k| &**k != OWN) {
            let r = self.routes.entry(key.clone()).or_default();
            for name in &gateway_secrets {
                r.require(ResourceType::Secret, name, Part::Whole);
            }
        }
        for (table, scheme) in route_tables(port) {
            let context = table_parts::Context {
                table: table.name.as_str().into(),
                listener: lds.1.as_str().into(),
                own_share: own_share.clone(),
                secrets: gateway_secrets.iter().map(|s| s.as_str().into()).collect(),
            };
            self.add_route_table(table, scheme, context, inputs);
            for key in self.shares[&table.name].by_key.keys() {
                of_listener.insert(key.clone(), own_share.clone());
            }
        }
        self.fragments.push((lds, Arc::new(of_listener)));
    }

    /// Each object's share of the listener, in that object's parts.
    fn require_listener_fragments(&mut self, lds: &Named, of_listener: &Fragment) {
        for (key, hash) in of_listener {
            let part = Part::Fragment(hash.clone());
            if &**key == OWN {
                self.own.require(lds.0, &lds.1, part);
            } else {
                self.routes
                    .entry(key.clone())
                    .or_default()
                    .require(lds.0, &lds.1, part);
            }
        }
    }

    /// A port's certificates and CAs, each one SDS secret, which the object
    /// owning the chain needs as it is now; by owner, the secrets' names.
    fn add_chain_secrets<'p>(
        &mut self,
        port: &'p ir::Port,
        secrets_added: &mut BTreeSet<String>,
    ) -> BTreeMap<&'p str, BTreeSet<String>> {
        let mut secrets: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for chain in &port.tls_chains {
            let owner = listener::chain_owner(chain);
            for s in secret::of_chain(chain) {
                self.member((ResourceType::Secret, s.name.clone()));
                let parts = if owner == OWN {
                    &mut self.own
                } else {
                    self.route_parts(owner)
                };
                parts.require(ResourceType::Secret, &s.name, Part::Whole);
                if secrets_added.insert(s.name.clone()) {
                    self.add(ResourceType::Secret, &s.name, s.encode_to_vec(), vec![]);
                }
                secrets.entry(owner).or_default().insert(s.name);
            }
        }
        secrets
    }

    /// A route table, encoded route by route (taking unchanged routes'
    /// encodings from the build before), its route keys' parts (taking
    /// unchanged keys' from the build before), and the clusters they use.
    fn add_route_table(
        &mut self,
        table: &ir::RouteTable,
        scheme: Scheme,
        context: table_parts::Context,
        inputs: &Inputs,
    ) {
        let earlier = inputs.before.and_then(|(gw, b)| {
            Some((
                route_cache::route_table(gw, &table.name)?,
                b.tables.get(&table.name)?,
            ))
        });
        let encoded = EncodedTable::new(table, scheme, earlier, &mut self.route_count);
        let rds = (ResourceType::Route, table.name.clone());
        self.own.require(rds.0, &rds.1, Part::Present);
        self.fragments
            .push((rds.clone(), Arc::new(encoded.fragments())));
        let before = inputs.before.and_then(|(_, b)| b.shares.get(&table.name));
        let shares = table_parts::shares(&encoded, context, inputs.known, inputs.moved, before);
        self.shares_made += shares.made;
        // The clusters the table names (those the IR defines): its routes'
        // and their mirrors'.
        let mut table_clusters: BTreeSet<&str> = BTreeSet::new();
        for (key, share) in &shares.by_key {
            self.add_share(key, share, inputs.before.map(|(_, b)| b));
            for (cluster, reads) in &share.reads {
                if reads.is_some() {
                    table_clusters.insert(cluster);
                }
            }
        }
        let mirrored: BTreeSet<&str> = encoded
            .keys()
            .values()
            .flat_map(|f| &f.clusters.mirror)
            .map(|c| &**c)
            .filter(|c| !table_clusters.contains(c))
            .collect();
        let mirrored: Vec<String> = mirrored
            .into_iter()
            .filter(|c| (inputs.known)(c).is_some())
            .map(str::to_string)
            .collect();
        let references = table_clusters
            .into_iter()
            .map(str::to_string)
            .chain(mirrored);
        let references = references.collect();
        self.add(rds.0, &rds.1, encoded.bytes(), references);
        self.tables.insert(table.name.clone(), encoded);
        self.shares.insert(table.name.clone(), shares);
        self.member(rds);
    }

    /// One route key's share of a table: its parts (shared with the share
    /// while the key has no others), and the clusters it names among the
    /// Gateway's clusters and members.
    fn add_share(
        &mut self,
        key: &Arc<str>,
        share: &table_parts::Share,
        before: Option<&GatewayBuild>,
    ) {
        match self.routes.get_mut(key) {
            None => {
                self.routes.insert(key.clone(), share.parts.clone());
            }
            Some(r) => {
                let merges = self.merges.entry(key.to_string()).or_default();
                let was = before.and_then(|b| b.merges.get(&**key)?.get(merges.len()));
                let merge = table_parts::merge(r, &share.parts, was);
                *r = merge.result.clone();
                merges.push(merge);
            }
        }
        for (cluster, reads) in &share.reads {
            // A cluster named before brought its members then.
            if self.clusters_named.contains_key(&**cluster) {
                continue;
            }
            self.clusters_named
                .insert(cluster.to_string(), reads.clone());
            self.add_cluster_members(cluster, reads);
        }
    }

    /// A cluster the IR defines, with its endpoints and secrets, as members.
    fn add_cluster_members(&mut self, cluster: &str, reads: &ClusterReads) {
        let Some(reads) = reads else {
            return;
        };
        self.member((ResourceType::Cluster, cluster.to_string()));
        for (ty, name) in reads.iter() {
            if matches!(ty, ResourceType::Endpoint | ResourceType::Secret) {
                self.member((*ty, name.clone()));
            }
        }
    }

    /// An L4 route's cluster, with what the IR defines of it: the cluster as
    /// built, its endpoints as they come, its secrets as they are now.
    fn use_cluster(&mut self, known: &dyn Fn(&str) -> ClusterReads, key: &str, cluster: &str) {
        let reads = known(cluster);
        if !self.clusters_named.contains_key(cluster) {
            self.clusters_named
                .insert(cluster.to_string(), reads.clone());
            self.add_cluster_members(cluster, &reads);
        }
        let Some(reads) = reads else {
            return;
        };
        self.route_parts(key)
            .require_cluster(&cluster.into(), &reads);
    }

    /// The parts of the route `key`, added if it has none yet.
    fn route_parts(&mut self, key: &str) -> &mut ObjectParts {
        if !self.routes.contains_key(key) {
            self.routes.insert(key.into(), ObjectParts::default());
        }
        self.routes.get_mut(key).expect("just added")
    }

    /// An authorization server the Gateway's listeners call: the Gateway's
    /// own part, with its endpoints and secrets.
    fn own_auth_cluster(&mut self, cluster: String, known: &dyn Fn(&str) -> ClusterReads) {
        let reads = known(&cluster);
        if let Some(reads) = &reads {
            for (ty, name) in std::iter::once((ResourceType::Cluster, cluster.clone())).chain(
                reads
                    .iter()
                    .filter(|(ty, _)| matches!(ty, ResourceType::Endpoint | ResourceType::Secret))
                    .cloned(),
            ) {
                let part = match ty {
                    ResourceType::Endpoint => Part::Present,
                    _ => Part::Whole,
                };
                self.own.require(ty, &name, part);
                self.member((ty, name));
            }
        }
        self.clusters_named.insert(cluster, reads);
    }
}

/// A port's L4 forwards: the port's own and its TLS chains'.
fn forwards(port: &ir::Port) -> impl Iterator<Item = &ir::L4Forward> {
    port.forward
        .iter()
        .chain(port.tls_chains.iter().filter_map(|c| c.forward.as_ref()))
}

/// The clusters an L4 listener forwards to itself, those the IR defines.
fn l4_clusters<'p>(
    port: &'p ir::Port,
    known: &'p dyn Fn(&str) -> ClusterReads,
) -> impl Iterator<Item = String> + 'p {
    forwards(port)
        .flat_map(|f| f.backends.iter().map(|b| b.cluster.clone()))
        .filter(move |c| known(c).is_some())
}

/// Exactly the route tables the listener's connection managers name.
fn route_tables(port: &ir::Port) -> Vec<(&ir::RouteTable, Scheme)> {
    match port.protocol {
        ir::PortProtocol::Http => port.route_table.iter().map(|t| (t, Scheme::Http)).collect(),
        ir::PortProtocol::Https | ir::PortProtocol::Tls => port
            .tls_chains
            .iter()
            .filter_map(|c| c.route_table.as_ref())
            .map(|t| (t, Scheme::Https))
            .collect(),
        ir::PortProtocol::Tcp | ir::PortProtocol::Udp => vec![],
    }
}
