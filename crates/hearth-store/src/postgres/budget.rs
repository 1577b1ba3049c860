//! Budget reservations and use on PostgreSQL, shared by replicas.
//!
//! A reservation or settlement locks its pools' `budget_pools` rows, one at
//! a time in (pool, subject) order so that two calls drawing from the same
//! pools cannot deadlock, then reads use and live holds under the locks.

use deadpool_postgres::Transaction;
use hearth_core::Timestamp;

use super::PostgresStore;
use super::rows::col;
use crate::budget::{
    BudgetLedger, LedgerCharge, LedgerHold, LedgerRow, LedgerUse, Reserved, Settled, crossed, level,
};
use crate::error::Result;

/// A hold counts when its holder is the caller or heartbeated lately.
macro_rules! live_hold {
    ($holder:literal, $since:literal) => {
        concat!(
            "(h.holder = ",
            $holder,
            " OR EXISTS (SELECT 1 FROM replicas r WHERE r.id = h.holder AND r.last_seen >= ",
            $since,
            "))"
        )
    };
}

/// Each `(pool, subject, since)`'s use and live holds, by its index.
const STATE: &str = concat!(
    "SELECT t.i, \
     coalesce((SELECT sum(u.used) FROM budget_use u \
       WHERE u.pool = t.p AND u.subject = t.s AND u.bucket >= t.since), 0)::FLOAT8, \
     coalesce((SELECT sum(h.amount) FROM budget_holds h \
       WHERE h.pool = t.p AND h.subject = t.s AND ",
    live_hold!("$5", "$6"),
    "), 0)::FLOAT8 \
     FROM unnest($1::TEXT[], $2::TEXT[], $3::BIGINT[], $4::INT[]) AS t(p, s, since, i)"
);

/// Locks the row of `(pool, subject)`, made if new; returns the threshold
/// announced last.
const LOCK: &str = "INSERT INTO budget_pools (pool, subject) VALUES ($1, $2) \
     ON CONFLICT (pool, subject) DO UPDATE SET pool = excluded.pool \
     RETURNING announced_key, announced";

/// Locks the pool rows of `keys` in a fixed order; what each announced
/// last, in the order of `keys`.
async fn lock(tx: &Transaction<'_>, keys: &[(&str, &str)]) -> Result<Vec<(Timestamp, u8)>> {
    let stmt = tx.prepare_cached(LOCK).await?;
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|a, b| keys[*a].cmp(&keys[*b]));
    let mut out = vec![(0, 0); keys.len()];
    for i in order {
        let row = tx.query_one(&stmt, &[&keys[i].0, &keys[i].1]).await?;
        let announced: i16 = col(&row, 1)?;
        out[i] = (col(&row, 0)?, u8::try_from(announced).unwrap_or(0));
    }
    Ok(out)
}

/// The state of each `(pool, subject, since)`, in order.
async fn state(
    tx: &Transaction<'_>,
    keys: &[(&str, &str, Timestamp)],
    holder: &str,
    alive_since: Timestamp,
) -> Result<Vec<LedgerUse>> {
    let pools: Vec<&str> = keys.iter().map(|k| k.0).collect();
    let subjects: Vec<&str> = keys.iter().map(|k| k.1).collect();
    let since: Vec<Timestamp> = keys.iter().map(|k| k.2).collect();
    let index: Vec<i32> = (0..keys.len())
        .map(|i| i32::try_from(i).unwrap_or(i32::MAX))
        .collect();
    let stmt = tx.prepare_cached(STATE).await?;
    let rows = tx
        .query(
            &stmt,
            &[&pools, &subjects, &since, &index, &holder, &alive_since],
        )
        .await?;
    let mut out = vec![LedgerUse::default(); keys.len()];
    for row in &rows {
        let i: i32 = col(row, 0)?;
        if let Some(slot) = usize::try_from(i).ok().and_then(|i| out.get_mut(i)) {
            *slot = LedgerUse {
                used: col(row, 1)?,
                reserved: col(row, 2)?,
            };
        }
    }
    Ok(out)
}

/// A new reservation's id: `bh_` and 16 random hex digits.
fn hold_id() -> Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| {
        crate::error::StoreError::Corrupt(format!("no randomness for a budget hold's id: {e}"))
    })?;
    Ok(format!("bh_{}", data_encoding::HEXLOWER.encode(&bytes)))
}

#[async_trait::async_trait]
impl BudgetLedger for PostgresStore {
    async fn reserve(
        &self,
        holds: &[LedgerHold],
        holder: &str,
        now: Timestamp,
        alive_since: Timestamp,
    ) -> Result<Reserved> {
        let id = hold_id()?;
        if holds.is_empty() {
            return Ok(Reserved::Held { id, pools: vec![] });
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let keys: Vec<(&str, &str)> = holds
            .iter()
            .map(|h| (h.pool.as_str(), h.subject.as_str()))
            .collect();
        lock(&tx, &keys).await?;
        let windows: Vec<(&str, &str, Timestamp)> = holds
            .iter()
            .map(|h| (h.pool.as_str(), h.subject.as_str(), h.since))
            .collect();
        let mut pools = state(&tx, &windows, holder, alive_since).await?;
        for (index, (h, s)) in holds.iter().zip(&pools).enumerate() {
            if s.used + s.reserved + h.amount > h.limit {
                // Dropping the transaction rolls it back: nothing is held.
                return Ok(Reserved::Refused { index, state: *s });
            }
        }
        let amounts: Vec<f64> = holds.iter().map(|h| h.amount).collect();
        let (names, subjects): (Vec<&str>, Vec<&str>) = keys.iter().copied().unzip();
        tx.execute(
            "INSERT INTO budget_holds (id, pool, subject, amount, holder, created_at) \
             SELECT $1, p, s, a, $5, $6 FROM unnest($2::TEXT[], $3::TEXT[], $4::FLOAT8[]) \
             AS t(p, s, a)",
            &[&id, &names, &subjects, &amounts, &holder, &now],
        )
        .await?;
        tx.commit().await?;
        for (s, h) in pools.iter_mut().zip(holds) {
            s.reserved += h.amount;
        }
        Ok(Reserved::Held { id, pools })
    }

    async fn settle(
        &self,
        id: &str,
        charges: &[LedgerCharge],
        holder: &str,
        alive_since: Timestamp,
    ) -> Result<Vec<Settled>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let keys: Vec<(&str, &str)> = charges
            .iter()
            .map(|c| (c.pool.as_str(), c.subject.as_str()))
            .collect();
        let announced = lock(&tx, &keys).await?;
        tx.execute("DELETE FROM budget_holds WHERE id = $1", &[&id])
            .await?;
        let (names, subjects): (Vec<&str>, Vec<&str>) = keys.iter().copied().unzip();
        let buckets: Vec<Timestamp> = charges.iter().map(|c| c.bucket).collect();
        let amounts: Vec<f64> = charges.iter().map(|c| c.amount).collect();
        tx.execute(
            "INSERT INTO budget_use (pool, subject, bucket, used) \
             SELECT * FROM unnest($1::TEXT[], $2::TEXT[], $3::BIGINT[], $4::FLOAT8[]) \
             ON CONFLICT (pool, subject, bucket) DO UPDATE SET used = budget_use.used + excluded.used",
            &[&names, &subjects, &buckets, &amounts],
        )
        .await?;
        let windows: Vec<(&str, &str, Timestamp)> = charges
            .iter()
            .map(|c| (c.pool.as_str(), c.subject.as_str(), c.since))
            .collect();
        let states = state(&tx, &windows, holder, alive_since).await?;
        let mut out = Vec::with_capacity(charges.len());
        for ((c, s), before) in charges.iter().zip(states).zip(announced) {
            let (passed, after) = crossed(before, c.announce_key, level(s.used, c.limit));
            if after != before {
                tx.execute(
                    "UPDATE budget_pools SET announced_key = $3, announced = $4 \
                     WHERE pool = $1 AND subject = $2",
                    &[&c.pool, &c.subject, &after.0, &i16::from(after.1)],
                )
                .await?;
            }
            out.push(Settled {
                state: s,
                crossed: passed,
            });
        }
        tx.commit().await?;
        Ok(out)
    }

    async fn status(
        &self,
        pools: &[(String, Timestamp)],
        holder: &str,
        alive_since: Timestamp,
    ) -> Result<Vec<LedgerRow>> {
        let names: Vec<&str> = pools.iter().map(|p| p.0.as_str()).collect();
        let since: Vec<Timestamp> = pools.iter().map(|p| p.1).collect();
        let client = self.client().await?;
        let rows = client
            .query(
                concat!(
                    "WITH q AS (SELECT * FROM unnest($1::TEXT[], $2::BIGINT[]) AS t(p, since)), \
                     u AS (SELECT u.pool, u.subject, sum(u.used)::FLOAT8 AS used, \
                       min(u.bucket) AS oldest FROM budget_use u \
                       JOIN q ON u.pool = q.p AND u.bucket >= q.since GROUP BY 1, 2), \
                     h AS (SELECT h.pool, h.subject, sum(h.amount)::FLOAT8 AS reserved \
                       FROM budget_holds h JOIN q ON h.pool = q.p WHERE ",
                    live_hold!("$3", "$4"),
                    " GROUP BY 1, 2) \
                     SELECT coalesce(u.pool, h.pool), coalesce(u.subject, h.subject), \
                     coalesce(u.used, 0)::FLOAT8, coalesce(h.reserved, 0)::FLOAT8, u.oldest \
                     FROM u FULL JOIN h ON u.pool = h.pool AND u.subject = h.subject \
                     ORDER BY 1, 2"
                ),
                &[&names, &since, &holder, &alive_since],
            )
            .await?;
        rows.iter()
            .map(|row| {
                Ok(LedgerRow {
                    pool: col(row, 0)?,
                    subject: col(row, 1)?,
                    state: LedgerUse {
                        used: col(row, 2)?,
                        reserved: col(row, 3)?,
                    },
                    oldest: col(row, 4)?,
                })
            })
            .collect()
    }

    async fn seed(&self, uses: &[(String, String, Timestamp, f64)]) -> Result<()> {
        if uses.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = uses.iter().map(|u| u.0.as_str()).collect();
        let subjects: Vec<&str> = uses.iter().map(|u| u.1.as_str()).collect();
        let buckets: Vec<Timestamp> = uses.iter().map(|u| u.2).collect();
        let amounts: Vec<f64> = uses.iter().map(|u| u.3).collect();
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO budget_use (pool, subject, bucket, used) \
                 SELECT * FROM unnest($1::TEXT[], $2::TEXT[], $3::BIGINT[], $4::FLOAT8[]) \
                 ON CONFLICT (pool, subject, bucket) DO NOTHING",
                &[&names, &subjects, &buckets, &amounts],
            )
            .await?;
        Ok(())
    }

    async fn tidy(
        &self,
        holder: &str,
        live: &[String],
        before: Timestamp,
        alive_since: Timestamp,
        forget_before: Timestamp,
    ) -> Result<u64> {
        let client = self.client().await?;
        let gone = client
            .execute(
                concat!(
                    "DELETE FROM budget_holds h WHERE NOT ",
                    live_hold!("$1", "$2"),
                    " OR (h.holder = $1 AND h.created_at < $3 AND h.id <> ALL($4::TEXT[]))"
                ),
                &[&holder, &alive_since, &before, &live],
            )
            .await?;
        client
            .execute(
                "DELETE FROM budget_use WHERE bucket < $1",
                &[&forget_before],
            )
            .await?;
        Ok(gone)
    }
}
