//! Grants and the audit log on PostgreSQL.
//!
//! A grant change and its audit event commit together; the change is one
//! statement (`ON CONFLICT DO NOTHING`, `DELETE`) whose row count says
//! whether it happened, so of two replicas making the same change at once
//! exactly one writes the event: the second waits for the first's row and
//! then finds nothing to do.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::rows::col;
use super::shared::append_audit;
use super::{PostgresStore, wide};
use crate::error::Result;
use crate::grants::{GrantStore, audit_limit};
use crate::records::{AuditEvent, Grant};

/// The `grants` columns in the order [`grant_row`] reads them.
macro_rules! grant_columns {
    () => {
        "subject, capability, scope, granted_at, granted_by"
    };
}

fn grant_row(row: &Row) -> Result<Grant> {
    Ok(Grant {
        subject: col(row, 0)?,
        capability: col(row, 1)?,
        scope: col(row, 2)?,
        granted_at: col(row, 3)?,
        granted_by: col(row, 4)?,
    })
}

fn grant_rows(rows: &[Row]) -> Result<Vec<Grant>> {
    rows.iter().map(grant_row).collect()
}

async fn add_grant(c: &impl GenericClient, grant: &Grant) -> Result<bool> {
    let inserted = c
        .execute(
            "INSERT INTO grants (subject, capability, scope, granted_at, granted_by) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (subject, capability, scope) DO NOTHING",
            &[
                &grant.subject,
                &grant.capability,
                &grant.scope,
                &grant.granted_at,
                &grant.granted_by,
            ],
        )
        .await?;
    Ok(inserted == 1)
}

async fn remove_grant(
    c: &impl GenericClient,
    subject: &str,
    capability: &str,
    scope: &str,
) -> Result<bool> {
    let removed = c
        .execute(
            "DELETE FROM grants WHERE subject = $1 AND capability = $2 AND scope = $3",
            &[&subject, &capability, &scope],
        )
        .await?;
    Ok(removed == 1)
}

#[async_trait::async_trait]
impl GrantStore for PostgresStore {
    async fn add_grant(&self, grant: Grant) -> Result<bool> {
        let client = self.client().await?;
        let created = add_grant(&client, &grant).await;
        // Seen by this replica's next read, not only once told.
        self.inner.access.changed();
        created
    }

    async fn add_grant_audited(&self, grant: Grant, event: AuditEvent) -> Result<bool> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let created = add_grant(&tx, &grant).await?;
        if created {
            append_audit(&tx, &event).await?;
        }
        tx.commit().await?;
        self.inner.access.changed();
        Ok(created)
    }

    async fn remove_grant(&self, subject: &str, capability: &str, scope: &str) -> Result<bool> {
        let client = self.client().await?;
        let removed = remove_grant(&client, subject, capability, scope).await;
        self.inner.access.changed();
        removed
    }

    async fn remove_grant_audited(
        &self,
        subject: &str,
        capability: &str,
        scope: &str,
        event: AuditEvent,
    ) -> Result<bool> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let removed = remove_grant(&tx, subject, capability, scope).await?;
        if removed {
            append_audit(&tx, &event).await?;
        }
        tx.commit().await?;
        self.inner.access.changed();
        Ok(removed)
    }

    async fn list_grants(&self, scope: Option<&str>) -> Result<Vec<Grant>> {
        let client = self.client().await?;
        let rows = match scope {
            None => {
                client
                    .query(
                        concat!(
                            "SELECT ",
                            grant_columns!(),
                            " FROM grants ORDER BY subject, capability, scope"
                        ),
                        &[],
                    )
                    .await?
            }
            Some(scope) => {
                client
                    .query(
                        concat!(
                            "SELECT ",
                            grant_columns!(),
                            " FROM grants WHERE scope = $1 ORDER BY subject, capability"
                        ),
                        &[&scope],
                    )
                    .await?
            }
        };
        grant_rows(&rows)
    }

    async fn grants_for(&self, subjects: &[String], scopes: &[String]) -> Result<Vec<Grant>> {
        if subjects.is_empty() || scopes.is_empty() {
            return Ok(Vec::new());
        }
        // Read for every run's permissions: held while changes are heard.
        let cache = &self.inner.access;
        let key = super::access_cache::grants_key(subjects, scopes);
        if let Some(grants) = cache.grants(&key) {
            return Ok(grants);
        }
        let read_at = cache.read_at();
        let client = self.client().await?;
        // The usual run asks for one subject (its user) in one scope: that
        // statement keeps one generic plan, where the arrays' form was planned again on every call
        // (PostgreSQL estimates a generic `= ANY($1)` for ten elements and
        // so keeps custom plans: about 45 us of planning for 5 of work).
        // Lists travel as arrays so that one cached statement serves every
        // other length.
        let rows = match (subjects, scopes) {
            ([subject], [scope]) => {
                let stmt = client
                    .prepare_cached(concat!(
                        "SELECT ",
                        grant_columns!(),
                        " FROM grants WHERE subject = $1 AND scope = $2 \
                         ORDER BY subject, capability, scope"
                    ))
                    .await?;
                client.query(&stmt, &[subject, scope]).await?
            }
            _ => {
                let stmt = client
                    .prepare_cached(concat!(
                        "SELECT ",
                        grant_columns!(),
                        " FROM grants WHERE subject = ANY($1) AND scope = ANY($2) \
                         ORDER BY subject, capability, scope"
                    ))
                    .await?;
                client.query(&stmt, &[&subjects, &scopes]).await?
            }
        };
        let grants = grant_rows(&rows)?;
        cache.keep_grants(read_at, key, &grants);
        Ok(grants)
    }

    async fn append_audit(&self, event: AuditEvent) -> Result<()> {
        let client = self.client().await?;
        append_audit(&client, &event).await
    }

    async fn list_audit(&self, limit: u32) -> Result<Vec<AuditEvent>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT at, actor, action, target, outcome, capability, scope FROM audit \
                 ORDER BY at DESC, id DESC LIMIT $1",
                &[&wide(audit_limit(limit))],
            )
            .await?;
        rows.iter()
            .map(|row| {
                Ok(AuditEvent {
                    at: col(row, 0)?,
                    actor: col(row, 1)?,
                    action: col(row, 2)?,
                    target: col(row, 3)?,
                    outcome: col(row, 4)?,
                    capability: col(row, 5)?,
                    scope: col(row, 6)?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::PostgresStore;
    use crate::grants::GrantStore;

    /// How often the statements of grants for one subject in one scope were
    /// planned again (custom plans), on a store of one connection.
    async fn custom_plans(store: &PostgresStore) -> i64 {
        let client = store.client().await.unwrap();
        client
            .query_one(
                "SELECT coalesce(sum(custom_plans), 0)::BIGINT FROM pg_prepared_statements \
                 WHERE statement LIKE '%FROM grants WHERE subject%'",
                &[],
            )
            .await
            .unwrap()
            .get(0)
    }

    /// A run's permissions are read on every run: for one subject in one
    /// scope, the statement is planned once and not again on each call.
    #[tokio::test]
    async fn the_grants_of_one_subject_are_not_planned_again_on_every_read() {
        let Some(url) = super::super::testing::fresh_database_url().await else {
            return;
        };
        let store = PostgresStore::connect(&url, "TEST", 1).await.unwrap();
        let subjects = vec!["user:a".to_owned()];
        let scopes = vec!["global".to_owned()];
        for _ in 0..20 {
            assert!(
                store
                    .grants_for(&subjects, &scopes)
                    .await
                    .unwrap()
                    .is_empty()
            );
        }
        // PostgreSQL plans the first five executions of a statement for
        // their values before it compares them with a generic plan.
        let planned = custom_plans(&store).await;
        assert!(planned <= 5, "planned {planned} times of 20");
    }
}
