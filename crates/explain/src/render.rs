//! The human text of an [`Explanation`]:
//!
//! ```text
//! GET http://127.0.0.1:80/ (Host: a.example.com)
//!   1. listener      Gateway default/web takes 127.0.0.1:80 (HTTP listener http)
//!   2. virtual host  virtual host a.example.com (exact match of Host a.example.com)
//!                    · a note
//!   → 200 from Service default/web:8080 …
//! ```

use crate::{Answer, Explanation};

pub(crate) fn text(e: &Explanation) -> String {
    let width = e.steps.iter().map(|s| s.stage.len()).max().unwrap_or(0);
    let mut out = format!("{}\n", e.request);
    for (i, step) in e.steps.iter().enumerate() {
        out.push_str(&format!(
            "  {}. {:width$}  {}\n",
            i + 1,
            step.stage,
            step.text
        ));
        for note in &step.notes {
            out.push_str(&format!("     {:width$}  · {note}\n", ""));
        }
    }
    let answer = match &e.answer {
        Answer::Forwarded { backends } => {
            let list: Vec<String> = backends
                .iter()
                .filter(|b| b.weight > 0)
                .map(|b| format!("{} (weight {}/{})", b.backend, b.weight, b.of))
                .collect();
            format!("forwarded to {}", list.join(", "))
        }
        Answer::Redirect { status, location } => format!("{status} redirect to {location}"),
        Answer::Respond { status, why } => format!("{status} from Envoy: {why}"),
        Answer::Closed { why } => format!("no answer: {why}"),
    };
    out.push_str(&format!("  → {answer}\n"));
    for caveat in &e.caveats {
        out.push_str(&format!("  ! {caveat}\n"));
    }
    out
}
