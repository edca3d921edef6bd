//! Flame graphs as SVG (`--flamegraph FILE`), drawn by inferno (the Rust port of
//! FlameGraph) from the folded stacks, titled with the script and the target; a click
//! zooms, Ctrl-F searches, as in every FlameGraph SVG.

use inferno::flamegraph::{self, Options};

/// What a flame graph says about itself.
pub struct Titles<'a> {
    /// The script and the target.
    pub title: &'a str,
    /// The map and what its widths count.
    pub subtitle: &'a str,
    /// What a frame's number counts: `calls`, `nanoseconds`.
    pub count_name: &'a str,
}

/// The SVG of `lines` (folded stacks). With no line, the picture says that there was no
/// stack, and `empty` is true.
pub fn svg(lines: &[String], titles: &Titles<'_>) -> std::io::Result<(Vec<u8>, bool)> {
    let mut options = Options::default();
    options.title = titles.title.to_string();
    options.subtitle = Some(titles.subtitle.to_string());
    options.count_name = titles.count_name.to_string();
    // Colors by a hash of the name: the same function, the same color in every graph.
    options.hash = true;
    let mut out = Vec::new();
    match flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut out) {
        Ok(()) => Ok((out, false)),
        // No stack: inferno has written a picture that says so.
        Err(e) if lines.is_empty() && e.kind() == std::io::ErrorKind::InvalidData => Ok((out, true)),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_and_titles_are_in_the_svg() {
        let lines = vec!["main.main;main.work 3".to_string(), "main.main;main.idle 1".to_string()];
        let titles = Titles { title: "gtrace calls.gt: /bin/prog", subtitle: "@calls", count_name: "calls" };
        let (svg, empty) = svg(&lines, &titles).unwrap();
        let text = String::from_utf8(svg).unwrap();
        assert!(!empty);
        for want in ["gtrace calls.gt: /bin/prog", "<title>main.work (3 calls, 75.00%)</title>", "main.idle"] {
            assert!(text.contains(want), "{want} not in {text}");
        }
    }

    #[test]
    fn no_stacks_is_a_picture_that_says_so() {
        let titles = Titles { title: "t", subtitle: "@", count_name: "calls" };
        let (svg, empty) = svg(&[], &titles).unwrap();
        assert!(empty && String::from_utf8(svg).unwrap().contains("No valid input"));
    }
}
