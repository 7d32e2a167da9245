//! Where in a document a key is, for the line of a loader error (best effort:
//! the value tells what is wrong, the text where).

/// The 1-based line of the first `key:` in the document (best effort).
pub(super) fn key_line(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| is_key(l, key))
        .map_or_else(|| first_content_line(text), |i| i + 1)
}

/// The 1-based line of `metadata.<key>`: the `key:` among the direct
/// children of the top-level `metadata:` (that line itself when metadata is
/// written in flow style), wherever metadata stands in the document and
/// whatever `name:` keys come before it; else [`key_line`].
pub(super) fn metadata_key_line(text: &str, key: &str) -> usize {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let content = |l: &&str| !l.trim().is_empty() && !l.trim_start().starts_with('#');
    let lines: Vec<&str> = text.lines().collect();
    let Some(start) = lines
        .iter()
        .position(|l| indent(l) == 0 && is_key(l, "metadata"))
    else {
        return key_line(text, key);
    };
    let after_colon = lines[start]
        .split_once(':')
        .map_or("", |(_, rest)| rest.trim());
    if after_colon.starts_with('{') {
        return start + 1;
    }
    let mut children = lines[start + 1..]
        .iter()
        .enumerate()
        .filter(|(_, l)| content(l))
        .take_while(|(_, l)| indent(l) > 0);
    let Some((_, first)) = children.clone().next() else {
        return key_line(text, key);
    };
    let depth = indent(first);
    children
        .find(|(_, l)| indent(l) == depth && is_key(l, key))
        .map_or_else(|| key_line(text, key), |(i, _)| start + 1 + i + 1)
}

/// Whether line `l` starts the mapping key `key` (plain or double-quoted,
/// maybe as the first key of a sequence item).
fn is_key(l: &str, key: &str) -> bool {
    let l = l.trim_start().trim_start_matches("- ").trim_start();
    l.strip_prefix(key)
        .or_else(|| l.strip_prefix(&format!("\"{key}\"")))
        .is_some_and(|rest| rest.trim_start().starts_with(':'))
}

/// The 1-based line of the first line that is not blank or a comment.
pub(super) fn first_content_line(text: &str) -> usize {
    text.lines()
        .position(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map_or(1, |i| i + 1)
}
