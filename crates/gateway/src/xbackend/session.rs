//! An XBackend's `sessionPersistence` → the IR session (Envoy's stateful
//! session), or why Envoy cannot do what it says.
//!
//! ```text
//!  type Cookie (default) ─ cookie.name (else aether-session-<digest of ns/name>)
//!                        ├ cookie.path (else "/")
//!                        └ lifetimeType Session (default)  → a session cookie
//!                          lifetimeType Permanent          → Max-Age = absoluteTimeout
//!  type Header ────────── header.name
//! ```
//!
//! Envoy's session state is the endpoint's address in a cookie or header;
//! the cookie's only lifetime is its Max-Age, which the client enforces, and
//! the header has none. So `absoluteTimeout` with a `Session` cookie (a
//! lifetime the gateway tracks behind a cookie without expiry) and with a
//! header are `UnsupportedValue`: there is no field in Envoy 1.40's
//! `CookieBasedSessionState` or `HeaderBasedSessionState` to carry it.

use crate::vocabulary::xbackend::Reason;
use aether_ir::{ObjectRef, SessionPersistence};
use gateway_api::apis::experimental::xbackends::{
    XBackendSessionPersistence, XBackendSessionPersistenceCookieLifetimeType as Lifetime,
    XBackendSessionPersistenceType as SessionType,
};
use sha2::{Digest, Sha256};

/// The cookie path when none is given (the API's default, a MUST).
const DEFAULT_PATH: &str = "/";

/// The session of XBackend `key`, or (reason, why not).
pub fn session(
    key: &ObjectRef,
    sp: &XBackendSessionPersistence,
) -> Result<SessionPersistence, Refusal> {
    let kind = sp.r#type.clone().unwrap_or(SessionType::Cookie);
    // The CRD's rules (standalone has no CEL to apply them).
    match kind {
        SessionType::Cookie if sp.header.is_some() => {
            return Err(invalid("header must be nil if type is not Header"));
        }
        SessionType::Header if sp.cookie.is_some() => {
            return Err(invalid("cookie must be nil if type is not Cookie"));
        }
        SessionType::Header if sp.header.is_none() => {
            return Err(invalid("header must be specified for Header type"));
        }
        _ => {}
    }
    let timeout_seconds = sp
        .absolute_timeout
        .as_deref()
        .map(|t| {
            crate::duration::parse_ms(t)
                .map(|ms| ms.div_ceil(1000))
                .map_err(|why| invalid(&format!("absoluteTimeout {why}")))
        })
        .transpose()?;
    match kind {
        SessionType::Header => header_session(sp, timeout_seconds),
        SessionType::Cookie => cookie_session(key, sp, timeout_seconds),
    }
}

/// Why a sessionPersistence is refused: the reason, and the message.
type Refusal = (Reason, String);

fn invalid(why: &str) -> Refusal {
    (Reason::Invalid, format!("sessionPersistence: {why}"))
}

fn unsupported(why: &str) -> Refusal {
    (
        Reason::UnsupportedValue,
        format!("sessionPersistence: {why}"),
    )
}

/// A Header session: the header name, checked and lower-cased.
fn header_session(
    sp: &XBackendSessionPersistence,
    timeout_seconds: Option<u64>,
) -> Result<SessionPersistence, Refusal> {
    let name = sp.header.as_ref().map(|h| h.name.as_str()).unwrap_or("");
    crate::header::check_name("sessionPersistence header name", name)
        .map_err(|e| invalid(&e.to_string()))?;
    if timeout_seconds.is_some() {
        return Err(unsupported(
            "absoluteTimeout with type Header: Envoy's header session \
             (envoy.http.stateful_session.header) has no lifetime to set",
        ));
    }
    Ok(SessionPersistence::Header {
        name: name.to_ascii_lowercase(),
    })
}

/// A Cookie session: its name (or one unique to the XBackend), path and
/// Max-Age.
fn cookie_session(
    key: &ObjectRef,
    sp: &XBackendSessionPersistence,
    timeout_seconds: Option<u64>,
) -> Result<SessionPersistence, Refusal> {
    let cookie = sp.cookie.clone().unwrap_or_default();
    let lifetime = cookie.lifetime_type.unwrap_or(Lifetime::Session);
    let name = match cookie.name {
        Some(name) => {
            check_cookie_name(&name).map_err(|why| invalid(&why))?;
            name
        }
        None => default_cookie_name(key),
    };
    let path = cookie.path.unwrap_or_else(|| DEFAULT_PATH.to_string());
    check_cookie_path(&path).map_err(|why| invalid(&why))?;
    Ok(SessionPersistence::Cookie {
        name,
        path,
        ttl_seconds: cookie_max_age(lifetime, timeout_seconds)?,
    })
}

/// The cookie's Max-Age: the absoluteTimeout of a Permanent cookie; none
/// for a Session cookie, which Envoy cannot give a lifetime.
fn cookie_max_age(
    lifetime: Lifetime,
    timeout_seconds: Option<u64>,
) -> Result<Option<u64>, Refusal> {
    match (lifetime, timeout_seconds) {
        (Lifetime::Permanent, None) => Err(invalid(
            "AbsoluteTimeout must be specified when cookie lifetimeType is Permanent",
        )),
        // Max-Age 0 would be a session cookie, not a permanent one.
        (Lifetime::Permanent, Some(0)) => Err(unsupported(
            "absoluteTimeout 0s with lifetimeType Permanent: a cookie that \
             expires at once persists nothing",
        )),
        (Lifetime::Permanent, Some(t)) => Ok(Some(t)),
        (Lifetime::Session, None) => Ok(None),
        (Lifetime::Session, Some(_)) => Err(unsupported(
            "absoluteTimeout with lifetimeType Session: Envoy's cookie session \
             (envoy.http.stateful_session.cookie) can only give the cookie a \
             Max-Age, which would make it Permanent; it tracks no lifetime itself",
        )),
    }
}

/// A cookie name unique to the XBackend ("a unique cookie name SHOULD be
/// generated"), the same on every translation.
fn default_cookie_name(key: &ObjectRef) -> String {
    let digest = Sha256::digest(format!("{}/{}", key.namespace, key.name));
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("aether-session-{hex}")
}

/// An RFC 6265 cookie name: a token (visible ASCII, no separators).
fn check_cookie_name(name: &str) -> Result<(), String> {
    const SEPARATORS: &str = "()<>@,;:\\\"/[]?={} \t";
    if name.is_empty() || name.len() > 4096 {
        return Err(format!("cookie name {name:?} must be 1 to 4096 characters"));
    }
    match name
        .chars()
        .find(|c| !c.is_ascii_graphic() || SEPARATORS.contains(*c))
    {
        Some(c) => Err(format!(
            "cookie name {name:?} holds {c:?}, not a token character"
        )),
        None => Ok(()),
    }
}

/// A cookie Path attribute: starts with `/`, no `;` or control characters.
fn check_cookie_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') || path.len() > 1024 {
        return Err(format!(
            "cookie path {path:?} must start with \"/\" and be at most 1024 characters"
        ));
    }
    match path.chars().find(|c| *c == ';' || c.is_ascii_control()) {
        Some(c) => Err(format!("cookie path {path:?} holds {c:?}")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(yaml: &str) -> XBackendSessionPersistence {
        serde_norway::from_str(yaml).unwrap()
    }

    fn of(yaml: &str) -> Result<SessionPersistence, (Reason, String)> {
        session(&ObjectRef::new("app", "web"), &sp(yaml))
    }

    #[test]
    fn a_cookie_defaults_to_a_session_cookie_on_slash_with_a_stable_unique_name() {
        let Ok(SessionPersistence::Cookie {
            name,
            path,
            ttl_seconds,
        }) = of("type: Cookie\ncookie: {}")
        else {
            panic!()
        };
        assert_eq!((path.as_str(), ttl_seconds), ("/", None));
        assert!(name.starts_with("aether-session-"), "{name}");
        assert_eq!(
            Ok(SessionPersistence::Cookie {
                name: name.clone(),
                path,
                ttl_seconds
            }),
            of("cookie: {}")
        );
        let other = session(&ObjectRef::new("app", "other"), &sp("cookie: {}"));
        assert!(matches!(other, Ok(SessionPersistence::Cookie { name: n, .. }) if n != name));
    }

    #[test]
    fn a_permanent_cookie_lives_absolute_timeout() {
        let got =
            of("absoluteTimeout: 1h\ncookie: {name: sticky, path: /app, lifetimeType: Permanent}");
        assert_eq!(
            got,
            Ok(SessionPersistence::Cookie {
                name: "sticky".into(),
                path: "/app".into(),
                ttl_seconds: Some(3600)
            })
        );
        let missing = of("cookie: {lifetimeType: Permanent}").unwrap_err();
        assert_eq!(missing.0, Reason::Invalid);
    }

    #[test]
    fn what_envoy_cannot_do_is_unsupported_not_ignored() {
        for yaml in [
            "absoluteTimeout: 10m\ncookie: {lifetimeType: Session}",
            "absoluteTimeout: 10m\ntype: Header\nheader: {name: x-session}",
        ] {
            let (reason, why) = of(yaml).unwrap_err();
            assert_eq!(reason, Reason::UnsupportedValue, "{yaml}");
            assert!(why.contains("absoluteTimeout"), "{why}");
        }
    }

    #[test]
    fn the_crd_rules_hold_without_cel() {
        for yaml in [
            "type: Header",
            "type: Header\ncookie: {}\nheader: {name: x}",
            "type: Cookie\nheader: {name: x}",
            "cookie: {name: 'a b'}",
            "cookie: {path: 'no-slash'}",
            "absoluteTimeout: soon\ncookie: {}",
        ] {
            assert_eq!(of(yaml).unwrap_err().0, Reason::Invalid, "{yaml}");
        }
    }
}
