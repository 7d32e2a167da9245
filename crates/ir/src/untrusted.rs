//! Text from outside — Envoy's NACK messages, values read from input — made
//! fit to store and show: in a status condition, a log line, a debug page.
//!
//! ```text
//!  key material      a PEM private key block, any `inline_string` / `inline_bytes`
//!                    value (proto text or JSON spelling)          → [redacted]
//!  control bytes     newlines, ESC, BEL, ...                      → one space
//!  length            at most MAX_MESSAGE_BYTES                    → … (N bytes more)
//! ```
//!
//! Envoy quotes the resource it refused, with what it holds: a cluster or
//! secret refused on validation carried its private key in the message.

/// The longest message kept (bytes, cut on a char boundary).
pub const MAX_MESSAGE_BYTES: usize = 1024;

const REDACTED: &str = "[redacted]";

/// `text` with key material redacted, control characters as spaces, and at
/// most [`MAX_MESSAGE_BYTES`] long.
pub fn message(text: &str) -> String {
    let text = redact_inline_values(&redact_private_keys(text));
    let text: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    bound(text)
}

fn bound(mut text: String) -> String {
    if text.len() <= MAX_MESSAGE_BYTES {
        return text;
    }
    let mut cut = MAX_MESSAGE_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let more = text.len() - cut;
    text.truncate(cut);
    text.push_str(&format!("… ({more} bytes more)"));
    text
}

/// Every `-----BEGIN … PRIVATE KEY-----` block, to its END line or, cut
/// short, to the end of the text.
fn redact_private_keys(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(begin) = rest.find("-----BEGIN ") {
        let label_end = rest[begin + 11..].find("-----").map(|i| begin + 11 + i);
        let is_key = label_end.is_some_and(|end| rest[begin + 11..end].contains("PRIVATE KEY"));
        if !is_key {
            out.push_str(&rest[..begin + 11]);
            rest = &rest[begin + 11..];
            continue;
        }
        out.push_str(&rest[..begin]);
        out.push_str(REDACTED);
        let after = &rest[begin..];
        rest = match after.find("-----END ") {
            Some(end) => {
                let tail = &after[end + 9..];
                tail.find("-----").map_or("", |i| &tail[i + 5..])
            }
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// The quoted value after every `inline_string`/`inline_bytes` (and their
/// JSON spellings): certificates, keys and CA bundles travel there.
fn redact_inline_values(text: &str) -> String {
    const KEYS: [&str; 4] = [
        "inline_string",
        "inline_bytes",
        "inlineString",
        "inlineBytes",
    ];
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let next = KEYS
            .iter()
            .filter_map(|k| rest.find(k).map(|at| (at, k.len())))
            .min();
        let Some((at, len)) = next else { break };
        let value_from = at + len;
        out.push_str(&rest[..value_from]);
        rest = &rest[value_from..];
        // `: "…"`, `":"…"` or ` "…"`: up to the opening quote.
        let gap = rest
            .find(|c: char| !matches!(c, ' ' | ':' | '"' | '\\'))
            .unwrap_or(rest.len());
        let Some(open) = rest[..gap].rfind('"') else {
            continue;
        };
        out.push_str(&rest[..=open]);
        rest = &rest[open + 1..];
        let close = closing_quote(rest);
        out.push_str(REDACTED);
        rest = &rest[close..];
    }
    out.push_str(rest);
    out
}

/// Where the quoted text that `text` starts inside ends: its unescaped `"`
/// (left in place), or the end of the text.
fn closing_quote(text: &str) -> usize {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return i,
            _ => escaped = false,
        }
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n";

    #[test]
    fn private_keys_are_redacted_however_envoy_quotes_them() {
        let escaped = KEY.replace('\n', "\\n");
        for text in [
            format!(
                "Proto constraint validation failed: private_key {{ inline_string: \"{escaped}\" }} tail"
            ),
            format!("{{\"privateKey\":{{\"inlineString\":\"{escaped}\"}}}} tail"),
            format!("raw {KEY} tail"),
            format!("cut short: {}", &KEY[..40]),
            "private_key { inline_bytes: \"TUlJRXZRSUJBREFOQmdrcWhraUc5dzBC\" } tail".to_string(),
        ] {
            let shown = message(&text);
            assert!(
                !shown.contains("MIIEvQ") && !shown.contains("TUlJRX"),
                "{shown}"
            );
            assert!(shown.contains(REDACTED), "{shown}");
            assert!(!text.contains("tail") || shown.contains("tail"), "{shown}");
        }
        // A certificate is not a key, but travels inline too.
        let cert = "certificate_chain { inline_string: \"-----BEGIN CERTIFICATE-----\\nMIIB\\n\" }";
        assert_eq!(
            message(cert),
            "certificate_chain { inline_string: \"[redacted]\" }"
        );
    }

    #[test]
    fn messages_are_one_line_and_bounded() {
        assert_eq!(message("a\nb\u{1b}[31mc\u{7}"), "a b [31mc ");
        let long = "é".repeat(2000);
        let shown = message(&long);
        assert!(shown.len() < MAX_MESSAGE_BYTES + 32, "{}", shown.len());
        assert!(shown.ends_with("(2976 bytes more)"), "{shown}");
        assert_eq!(message("plain"), "plain");
    }
}
