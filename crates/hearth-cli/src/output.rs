//! What every command prints with `--json`: one style, indented JSON, one
//! document per command, on stdout.

use serde::Serialize;

/// Prints `value` as indented JSON on stdout.
pub fn print_json(value: &impl Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => println!("{text}"),
        // Only a map with non-string keys fails to serialise; none of the
        // printed types has one, so say so rather than print nothing.
        Err(e) => eprintln!("hearth: cannot print the answer as JSON: {e}"),
    }
}

/// Lays out rows under headers in aligned columns: text columns left-aligned,
/// the others (numbers, costs) right-aligned, widths from the widest cell.
pub fn table(headers: &[&str], right: &[bool], rows: &[Vec<String>]) -> String {
    let width = |i: usize| {
        rows.iter()
            .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
            .chain(std::iter::once(headers[i].chars().count()))
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..headers.len()).map(width).collect();
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let w = widths.get(i).copied().unwrap_or(0);
                if right.get(i).copied().unwrap_or(false) {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        padded.join("  ").trim_end().to_owned()
    };
    let mut out = line(headers.to_vec());
    for r in rows {
        out.push('\n');
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_columns_align_whatever_the_cell_widths() {
        let rows = vec![
            vec!["openai/gpt-4.1-mini".to_owned(), "12345".to_owned()],
            vec!["echo".to_owned(), "2".to_owned()],
        ];
        let t = table(&["model", "calls"], &[false, true], &rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines,
            [
                "model                calls",
                "openai/gpt-4.1-mini  12345",
                "echo                     2",
            ]
        );
    }
}
