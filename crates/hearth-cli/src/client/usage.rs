//! `hearth usage`: model calls, tokens and estimated cost.

use hearth_server::dto::{UsageRow, UsageRows};

use super::{Api, enc};
use crate::Exit;
use crate::output::{print_json, table};

/// Significant digits a cost under a cent keeps, so $0.000042 does not print
/// as $0.0000.
const COST_SIGNIFICANT_DIGITS: i32 = 2;

/// Prints usage grouped by provider, model or day, in aligned columns.
pub(super) async fn usage(
    api: &Api,
    since: &str,
    until: Option<&str>,
    by: &str,
    json_out: bool,
) -> Result<(), Exit> {
    let mut path = format!("/v1/usage?group_by={}&since={}", enc(by), enc(since));
    if let Some(u) = until {
        path.push_str(&format!("&until={}", enc(u)));
    }
    let usage: UsageRows = api.get(&path).await?;
    if json_out {
        print_json(&usage);
        return Ok(());
    }
    if usage.rows.is_empty() {
        println!("no model calls since {since}");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = usage
        .rows
        .iter()
        .map(|r| {
            vec![
                r.key.clone(),
                r.calls.to_string(),
                r.input_tokens.to_string(),
                r.output_tokens.to_string(),
                r.cached_tokens.to_string(),
                cost_text(r),
            ]
        })
        .collect();
    let headers = [by, "calls", "input", "output", "cached", "cost"];
    println!(
        "{}",
        table(&headers, &[false, true, true, true, true, true], &rows)
    );
    Ok(())
}

/// A usage row's cost for people: dollars, or why there is none.
pub(super) fn cost_text(row: &UsageRow) -> String {
    match row.cost_usd {
        Some(c) => usd(c),
        None if row.calls == row.untracked_calls => "not tracked".to_owned(),
        None => "not priced".to_owned(),
    }
}

/// Dollars with cents, and more decimals below a cent so that the first
/// significant digits show.
fn usd(c: f64) -> String {
    if c == 0.0 || !c.is_finite() {
        return format!("${c:.2}");
    }
    if c.abs() >= 0.01 {
        return format!("${c:.4}");
    }
    // Digits after the point: up to the first significant one, plus the rest.
    let first = -c.abs().log10().floor() as i32;
    let decimals = (first + COST_SIGNIFICANT_DIGITS - 1).clamp(4, 12) as usize;
    format!("${c:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_costs_keep_their_significant_digits() {
        for (c, text) in [
            (0.0, "$0.00"),
            (12.5, "$12.5000"),
            (0.0123, "$0.0123"),
            (0.004_2, "$0.0042"),
            (0.000_042, "$0.000042"),
            (0.000_000_31, "$0.00000031"),
        ] {
            assert_eq!(usd(c), text, "{c}");
        }
    }
}
