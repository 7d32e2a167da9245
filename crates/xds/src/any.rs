//! Packing messages into `google.protobuf.Any` and the ADS config source, the two
//! shapes every resource kind shares.

use envoy_types::pb::envoy::config::core::v3::{
    AggregatedConfigSource, ApiVersion, ConfigSource, config_source::ConfigSourceSpecifier,
};
use envoy_types::pb::google::protobuf::Any;

/// `message` as an `Any` (`typed_config`, resource bodies). Its type must be in the
/// descriptor set compiled by `build.rs`, or rendering fails.
pub(crate) fn pack<M: prost::Name>(message: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: message.encode_to_vec(),
    }
}

/// "Fetch this over the ADS stream you already have": how listeners find their
/// route tables (RDS) and clusters their endpoints (EDS).
pub(crate) fn ads_config_source() -> ConfigSource {
    ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(ConfigSourceSpecifier::Ads(AggregatedConfigSource {})),
        ..Default::default()
    }
}
