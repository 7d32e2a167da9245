//! What the ADS integration tests build alike: a snapshot's resources from
//! encoded Envoy messages, and a Gateway made of them.

use aether_xds::{Resource, ResourceType};
use std::collections::{BTreeMap, BTreeSet};

/// A snapshot's resources, by type and name.
pub type Resources = BTreeMap<ResourceType, BTreeMap<String, Resource>>;

/// One resource: its type, its name and its encoded message.
pub type Encoded<'a> = (ResourceType, &'a str, Vec<u8>);

/// Adds `added` to `resources`, replacing any of the same type and name.
pub fn add_resources<'a>(resources: &mut Resources, added: impl IntoIterator<Item = Encoded<'a>>) {
    for (ty, name, bytes) in added {
        let resource = Resource::new(name, ty.type_url(), bytes);
        resources
            .entry(ty)
            .or_default()
            .insert(name.to_string(), resource);
    }
}

pub fn mk_resources<'a>(resources: impl IntoIterator<Item = Encoded<'a>>) -> Resources {
    let mut out = Resources::new();
    add_resources(&mut out, resources);
    out
}

/// The members of a Gateway made of `resources`.
pub fn members_of(resources: &[Encoded<'_>]) -> BTreeSet<(ResourceType, String)> {
    resources
        .iter()
        .map(|(ty, name, _)| (*ty, name.to_string()))
        .collect()
}
