//! The CORS filter of an HTTPRoute rule, checked into an IR [`Cors`] policy.
//!
//! Origins are `*` alone, or `http(s)://host[:port]` where the host may start
//! with a `*` label that matches any number of labels to its left
//! (`https://*.bar.com` matches `https://a.b.bar.com`). Methods are RFC 9110
//! methods or `*` alone; header names are tokens or `*` alone. `maxAge`
//! defaults to 5 seconds, as the spec says the Gateway then answers.
//! `exposeHeaders: ["*"]` with credentials exposes only the safelisted headers:
//! the spec forbids answering `*` then, and response headers cannot be echoed.

use crate::header::check_name;
use crate::hostname::{self, Wildcard};
use aether_ir::Cors;
use gateway_api::apis::experimental::httproutes::HttpRouteRulesFiltersCors;

/// `Access-Control-Max-Age` when `maxAge` is left out.
const DEFAULT_MAX_AGE: u32 = 5;

const METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

pub fn checked(c: &HttpRouteRulesFiltersCors) -> Result<Cors, String> {
    let allow_origins = c.allow_origins.clone().unwrap_or_default();
    for o in &allow_origins {
        check_origin(o)?;
    }
    alone("allowOrigins", &allow_origins)?;
    let allow_methods = c.allow_methods.clone().unwrap_or_default();
    for m in allow_methods.iter().filter(|m| *m != "*") {
        if !METHODS.contains(&m.as_str()) {
            return Err(format!("CORS allowMethods {m:?} is not an HTTP method"));
        }
    }
    alone("allowMethods", &allow_methods)?;
    let allow_headers = header_names("allowHeaders", c.allow_headers.as_ref())?;
    let mut expose_headers = header_names("exposeHeaders", c.expose_headers.as_ref())?;
    let allow_credentials = c.allow_credentials.unwrap_or(false);
    // With credentials `*` may not be answered, and response headers cannot be
    // echoed: only the safelisted ones stay exposed.
    if allow_credentials && expose_headers == ["*"] {
        expose_headers.clear();
    }
    let max_age_seconds = match c.max_age {
        None => DEFAULT_MAX_AGE,
        Some(s) => u32::try_from(s)
            .ok()
            .filter(|s| *s > 0)
            .ok_or_else(|| format!("CORS maxAge {s} is not a positive number of seconds"))?,
    };
    Ok(Cors {
        allow_origins,
        allow_credentials,
        allow_methods,
        allow_headers,
        expose_headers,
        max_age_seconds: Some(max_age_seconds),
    })
}

/// `*` means everything: with other values beside it, the list says two things.
fn alone(field: &str, values: &[String]) -> Result<(), String> {
    if values.len() > 1 && values.iter().any(|v| v == "*") {
        return Err(format!(
            "CORS {field} cannot list \"*\" beside other values"
        ));
    }
    Ok(())
}

fn header_names(field: &str, names: Option<&Vec<String>>) -> Result<Vec<String>, String> {
    let names = names.cloned().unwrap_or_default();
    for n in names.iter().filter(|n| *n != "*") {
        check_name(&format!("CORS {field}"), n).map_err(|e| e.to_string())?;
    }
    alone(field, &names)?;
    Ok(names)
}

fn check_origin(origin: &str) -> Result<(), String> {
    if origin == "*" {
        return Ok(());
    }
    let invalid = |why: &str| format!("CORS allowOrigins {origin:?} is not an origin: {why}");
    let Some((scheme, rest)) = origin.split_once("://") else {
        return Err(invalid("expected <scheme>://<host>[:<port>]"));
    };
    if scheme != "http" && scheme != "https" {
        return Err(invalid("the scheme is http or https"));
    }
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (rest, None),
    };
    if let Some(p) = port
        && !p.parse::<u16>().is_ok_and(|p| p > 0)
    {
        return Err(invalid("the port is 1 to 65535"));
    }
    if host == "*" {
        return Ok(());
    }
    hostname::checked("CORS allowOrigins host", host, Wildcard::Allowed).map_err(|e| invalid(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cors(origins: &[&str]) -> HttpRouteRulesFiltersCors {
        HttpRouteRulesFiltersCors {
            allow_origins: Some(origins.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn origins_of_the_spec_are_accepted_with_the_default_max_age() {
        let ok = [
            "*",
            "https://www.foo.com",
            "https://*.bar.com",
            "http://a.b:8080",
        ];
        for o in ok {
            let c = checked(&cors(&[o])).unwrap_or_else(|e| panic!("{o}: {e}"));
            assert_eq!(c.max_age_seconds, Some(DEFAULT_MAX_AGE));
        }
    }

    #[test]
    fn anything_else_is_refused_naming_the_value() {
        for o in [
            "www.foo.com",
            "ftp://foo.com",
            "https://foo.com:0",
            "https://foo.com:99999",
            "https://fo o.com",
            "https://foo.*.com",
            "https://",
        ] {
            let err = checked(&cors(&[o])).expect_err(o);
            assert!(err.contains(&format!("{o:?}")), "{err}");
        }
        let err = checked(&cors(&["*", "https://a.com"])).unwrap_err();
        assert!(err.contains("beside other values"), "{err}");
        let mut c = cors(&["*"]);
        c.allow_methods = Some(vec!["get".into()]);
        assert!(checked(&c).unwrap_err().contains("\"get\""));
        c.allow_methods = None;
        c.allow_headers = Some(vec!["x header".into()]);
        assert!(checked(&c).is_err());
        c.allow_headers = None;
        c.max_age = Some(0);
        assert!(checked(&c).unwrap_err().contains("maxAge 0"));
    }
}
