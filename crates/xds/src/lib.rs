//! Build: IR → Envoy resources, with content versions (pure).

pub mod snapshot;

pub use snapshot::{GatewayResources, Resource, ResourceType, Snapshot};
