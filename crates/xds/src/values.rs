//! Envoy values built from IR pieces that routes, route actions and CORS
//! share: regular expressions, string and header matchers, headers to add.

use aether_ir as ir;
use envoy_types::pb::envoy::config::core::v3::{
    HeaderValue, HeaderValueOption, header_value_option::HeaderAppendAction,
};
use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, header_matcher::HeaderMatchSpecifier,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    RegexMatcher, StringMatcher, string_matcher::MatchPattern,
};

/// A regex for Envoy's default engine (RE2).
pub(crate) fn regex(r: &str) -> RegexMatcher {
    RegexMatcher {
        regex: r.to_string(),
        engine_type: None,
    }
}

pub(crate) fn string_matcher(v: &ir::StringMatch) -> StringMatcher {
    StringMatcher {
        match_pattern: Some(match v {
            ir::StringMatch::Exact(s) => MatchPattern::Exact(s.clone()),
            ir::StringMatch::RegularExpression(r) => MatchPattern::SafeRegex(regex(r)),
        }),
        ignore_case: false,
    }
}

pub(crate) fn header_matcher(name: &str, value: &ir::StringMatch) -> HeaderMatcher {
    HeaderMatcher {
        name: name.to_string(),
        header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(string_matcher(value))),
        ..Default::default()
    }
}

/// `set` overwrites (or adds), `add` appends to what is there: the Gateway API
/// header modifier semantics.
pub(crate) fn headers_to_add(m: &ir::HeaderModifier) -> Vec<HeaderValueOption> {
    let option = |h: &ir::Header, action: HeaderAppendAction| HeaderValueOption {
        header: Some(HeaderValue {
            key: h.name.clone(),
            value: h.value.clone(),
            ..Default::default()
        }),
        append_action: action as i32,
        ..Default::default()
    };
    m.set
        .iter()
        .map(|h| option(h, HeaderAppendAction::OverwriteIfExistsOrAdd))
        .chain(
            m.add
                .iter()
                .map(|h| option(h, HeaderAppendAction::AppendIfExistsOrAdd)),
        )
        .collect()
}
