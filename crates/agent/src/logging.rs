//! Log setup: human-readable text by default, one JSON object per line with
//! `--log-format json`. The level filter comes from `--log-level` (an
//! `EnvFilter` directive such as `info` or `aether_ads=debug,info`).

use clap::ValueEnum;
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// The levels a filter directive may name.
const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

/// A `--log-level` filter, checked: each comma-separated directive is a level
/// (`info`) or `target=level` (`aether_ads=debug`). A bare word that is not a
/// level would be read by `EnvFilter` as a target with every level on, and
/// everything else off: a typo (`inof`) would silence the log, so it is an
/// error instead.
pub fn parse_filter(s: &str) -> Result<String, String> {
    let usage = "use a level (trace, debug, info, warn, error, off) or target=level \
                 directives, e.g. `aether_ads=debug,info`";
    for directive in s.split(',').map(str::trim) {
        let level = match directive.rsplit_once('=') {
            Some((target, level)) if !target.is_empty() => level,
            _ => directive,
        };
        if !LEVELS.contains(&level.to_ascii_lowercase().as_str()) {
            return Err(format!("{directive:?} is not a log level: {usage}"));
        }
    }
    EnvFilter::try_new(s).map_err(|e| format!("{e}: {usage}"))?;
    Ok(s.to_string())
}

pub fn init(format: LogFormat, level: &str) {
    // Checked by `parse_filter` when read.
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_that_names_no_level_is_refused() {
        for ok in [
            "info",
            "WARN",
            "aether_ads=debug,info",
            "aether_k8s::status=trace",
            "off",
        ] {
            assert_eq!(parse_filter(ok).as_deref(), Ok(ok));
        }
        for bad in ["inof", "verbose", "info,aether_ads=loud", "=debug", ""] {
            let e = parse_filter(bad).unwrap_err();
            assert!(e.contains("not a log level"), "{bad}: {e}");
        }
    }
}
