//! A served file's text as the state file keeps it, deflated in memory until
//! a save: only the state file reads it, and YAML deflates well. The golden
//! inputs (testdata/) to a quarter; the propagation bench's 10,000 routes, 2.8
//! MiB of text, to under 0.1 MiB.

use std::sync::Arc;

/// Deflated text (shared: a save takes every file's, the cache keeps them).
#[derive(Clone)]
pub struct Packed(Arc<[u8]>);

/// Fast over small: a file is packed as it loads, on the config thread.
const LEVEL: u8 = 1;

impl Packed {
    pub fn of(text: &str) -> Packed {
        Packed(miniz_oxide::deflate::compress_to_vec(text.as_bytes(), LEVEL).into())
    }

    /// The text again. Only what [`Packed::of`] made is ever unpacked, so a
    /// failure is a bug, not input.
    pub fn text(&self) -> String {
        let bytes = miniz_oxide::inflate::decompress_to_vec(&self.0).expect("packed by Packed::of");
        String::from_utf8(bytes).expect("packed from a str")
    }
}

impl std::fmt::Debug for Packed {
    /// Not the text: it may hold a private key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Packed({} bytes)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_comes_back_as_it_went_in_and_smaller() {
        let text: String = (0..200)
            .map(|i| format!("- name: route-{i}\n  hostnames: [\"r{i}.example.com\"]\n"))
            .collect();
        let packed = Packed::of(&text);
        assert_eq!(packed.text(), text);
        let held = packed.0.len();
        assert!(held * 4 < text.len(), "{held} of {}", text.len());
        assert_eq!(Packed::of("").text(), "");
        assert_eq!(Packed::of("é ✓").text(), "é ✓");
    }
}
