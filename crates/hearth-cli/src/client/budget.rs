//! `hearth budget`: each limit pool's limit, use, holds and reset.

use hearth_server::routes::budget::BudgetPools;

use super::Api;
use crate::Exit;
use crate::output::{print_json, table};

/// Prints every pool in aligned columns (one row per subject of a scoped pool).
pub(super) async fn budget(api: &Api, json_out: bool) -> Result<(), Exit> {
    let budget: BudgetPools = api.get("/v1/budget").await?;
    if json_out {
        print_json(&budget);
        return Ok(());
    }
    if budget.pools.is_empty() {
        println!(
            "no budget pools: add [[budget.pools]] or [budget] global_daily_usd to hearth.toml"
        );
        return Ok(());
    }
    let rows: Vec<Vec<String>> = budget
        .pools
        .iter()
        .map(|p| {
            let amount = |x: f64| match p.kind.as_str() {
                "cost_usd" => format!("${x:.4}"),
                _ => format!("{x:.0}"),
            };
            vec![
                p.name.clone(),
                p.kind.clone(),
                match &p.subject {
                    Some(s) => format!("{}:{s}", p.scope),
                    None => p.scope.clone(),
                },
                amount(p.used),
                amount(p.reserved),
                amount(p.limit),
                percent(p.used + p.reserved, p.limit),
                p.resets_at.clone(),
            ]
        })
        .collect();
    let headers = [
        "pool",
        "kind",
        "scope",
        "used",
        "reserved",
        "limit",
        "of limit",
        "resets at",
    ];
    println!(
        "{}",
        table(
            &headers,
            &[false, false, false, true, true, true, true, false],
            &rows
        )
    );
    Ok(())
}

/// Share of the limit taken, for people.
fn percent(taken: f64, limit: f64) -> String {
    if limit <= 0.0 {
        return "-".into();
    }
    format!("{:.0}%", 100.0 * taken / limit)
}

#[cfg(test)]
mod tests {
    #[test]
    fn percent_of_the_limit() {
        assert_eq!(super::percent(0.8, 1.0), "80%");
        assert_eq!(super::percent(3.0, 2.0), "150%");
        assert_eq!(super::percent(1.0, 0.0), "-");
    }
}
