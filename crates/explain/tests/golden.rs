//! Golden tests of the explain text: every `testdata/explain/<name>.requests`
//! names a translate case (`# input: <case>`, its `testdata/<case>/in.yaml`) and
//! lists requests, one per line as the CLI takes them (`METHOD URL -H 'k: v'
//! --sni NAME`); `<name>.txt` beside it is the explanation of each, in order.
//! `UPDATE_GOLDEN=1 cargo test -p aether-explain --test golden` rewrites them.

use aether_explain::{Request, explain};
use aether_gateway::{Config, Store, translate};
use std::fs;
use std::path::{Path, PathBuf};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// Splits a line as a shell would for these arguments: whitespace, with '…'
/// and "…" quoting.
fn words(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn request(line: &str) -> Request {
    let w = words(line);
    let (mut headers, mut sni, mut i) = (Vec::new(), None, 2);
    while i < w.len() {
        match w[i].as_str() {
            "-H" => headers.push(w[i + 1].clone()),
            "--sni" => sni = Some(w[i + 1].clone()),
            other => panic!("{line}: unknown argument {other}"),
        }
        i += 2;
    }
    Request::parse(&w[0], &w[1], &headers, sni.as_deref()).unwrap_or_else(|e| panic!("{line}: {e}"))
}

fn render(requests: &str) -> String {
    let input = requests
        .lines()
        .find_map(|l| l.strip_prefix("# input: "))
        .expect("a '# input: <case>' line");
    let text =
        fs::read_to_string(testdata().join(input.trim()).join("in.yaml")).expect("the input case");
    let mut store = Store::default();
    store.add_yaml("in.yaml", &text).expect("the input loads");
    let t = translate(&store, &Config::default());
    let mut out = Vec::new();
    for line in requests
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let r = request(line);
        let e = explain(&store, &t.ir, &t.status, &r);
        assert_eq!(
            e,
            explain(&store, &t.ir, &t.status, &r),
            "{line}: not deterministic"
        );
        out.push(e.to_text());
    }
    out.join("\n")
}

#[test]
fn golden() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    let dir = testdata().join("explain");
    let mut cases: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("testdata/explain")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "requests"))
        .collect();
    cases.sort();
    let mut failures = Vec::new();
    for case in &cases {
        let got = render(&fs::read_to_string(case).unwrap());
        let golden = case.with_extension("txt");
        if update {
            fs::write(&golden, &got).unwrap();
        } else if fs::read_to_string(&golden).unwrap_or_default() != got {
            failures.push(format!(
                "{}: differs (UPDATE_GOLDEN=1 rewrites it)\n{got}",
                golden.display()
            ));
        }
    }
    if update {
        for entry in fs::read_dir(&dir).unwrap().flatten() {
            let p = entry.path();
            if p.extension().is_some_and(|x| x == "txt") && !p.with_extension("requests").exists() {
                fs::remove_file(&p).unwrap();
            }
        }
    }
    assert!(cases.len() >= 10, "{} cases", cases.len());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn words_split_like_a_shell() {
    assert_eq!(
        words(r#"GET http://x/ -H 'Host: a b' -H "x: 'y'""#),
        vec!["GET", "http://x/", "-H", "Host: a b", "-H", "x: 'y'"]
    );
}
