//! A Prometheus histogram of seconds, rendered in the text exposition format.

use std::fmt::Write;
use std::time::Duration;

#[derive(Debug)]
pub struct Histogram {
    /// Upper bounds, in seconds, ascending.
    buckets: &'static [f64],
    /// Per bucket (cumulative when rendered), then +Inf.
    counts: Vec<u64>,
    sum: f64,
}

impl Histogram {
    pub fn new(buckets: &'static [f64]) -> Self {
        Histogram {
            buckets,
            counts: vec![0; buckets.len() + 1],
            sum: 0.0,
        }
    }

    pub fn observe(&mut self, value: Duration) {
        let secs = value.as_secs_f64();
        let bucket = self
            .buckets
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(self.buckets.len());
        self.counts[bucket] += 1;
        self.sum += secs;
    }

    /// `# HELP`, `# TYPE` and the series of `name`.
    pub fn render(&self, name: &str, help: &str, out: &mut String) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (le, n) in self.buckets.iter().zip(&self.counts) {
            cumulative += n;
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        cumulative += self.counts[self.buckets.len()];
        let _ = writeln!(
            out,
            "{name}_bucket{{le=\"+Inf\"}} {cumulative}\n{name}_sum {}\n{name}_count {cumulative}",
            self.sum
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_the_rest_goes_to_inf() {
        let mut h = Histogram::new(&[0.1, 1.0]);
        for ms in [50, 100, 700, 3000] {
            h.observe(Duration::from_millis(ms));
        }
        let mut out = String::new();
        h.render("x_seconds", "X.", &mut out);
        assert_eq!(
            out,
            "# HELP x_seconds X.\n# TYPE x_seconds histogram\n\
             x_seconds_bucket{le=\"0.1\"} 2\nx_seconds_bucket{le=\"1\"} 3\n\
             x_seconds_bucket{le=\"+Inf\"} 4\nx_seconds_sum 3.85\nx_seconds_count 4\n"
        );
    }
}
