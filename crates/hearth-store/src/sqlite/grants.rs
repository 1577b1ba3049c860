//! Grants and the audit log on SQLite.

use rusqlite::{Params, Statement, params};

use super::SqliteStore;
use super::db::Db;
use super::rows::{col, to_json};
use crate::error::Result;
use crate::grants::{GrantStore, audit_limit};
use crate::records::{AuditEvent, Grant};

fn add_grant(db: &mut Db<'_>, grant: &Grant) -> Result<bool> {
    let inserted = db
        .stmt(
            "INSERT INTO grants (subject, capability, scope, granted_at, granted_by) \
             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (subject, capability, scope) DO NOTHING",
        )?
        .execute(params![
            grant.subject,
            grant.capability,
            grant.scope,
            grant.granted_at,
            grant.granted_by
        ])?;
    Ok(inserted == 1)
}

/// Adds a grant and, only when it was new, its audit event; the caller runs
/// this as one write, so both land in the same savepoint.
fn add_grant_audited(db: &mut Db<'_>, grant: &Grant, event: &AuditEvent) -> Result<bool> {
    let created = add_grant(db, grant)?;
    if created {
        append_audit(db, event)?;
    }
    Ok(created)
}

fn remove_grant(db: &mut Db<'_>, subject: &str, capability: &str, scope: &str) -> Result<bool> {
    let removed = db
        .stmt("DELETE FROM grants WHERE subject = ?1 AND capability = ?2 AND scope = ?3")?
        .execute(params![subject, capability, scope])?;
    Ok(removed == 1)
}

/// Removes a grant and, only when one was removed, writes its audit event.
fn remove_grant_audited(
    db: &mut Db<'_>,
    subject: &str,
    capability: &str,
    scope: &str,
    event: &AuditEvent,
) -> Result<bool> {
    let removed = remove_grant(db, subject, capability, scope)?;
    if removed {
        append_audit(db, event)?;
    }
    Ok(removed)
}

/// The `grants` columns in the order [`grant_row`] reads them.
macro_rules! grant_columns {
    () => {
        "subject, capability, scope, granted_at, granted_by"
    };
}

fn grant_row(row: &rusqlite::Row<'_>) -> Result<Grant> {
    Ok(Grant {
        subject: col(row, 0)?,
        capability: col(row, 1)?,
        scope: col(row, 2)?,
        granted_at: col(row, 3)?,
        granted_by: col(row, 4)?,
    })
}

fn collect_grants<P: Params>(stmt: &mut Statement<'_>, params: P) -> Result<Vec<Grant>> {
    let mut out = Vec::new();
    let mut found = stmt.query(params)?;
    while let Some(row) = found.next()? {
        out.push(grant_row(row)?);
    }
    Ok(out)
}

fn list_grants(db: &mut Db<'_>, scope: Option<&str>) -> Result<Vec<Grant>> {
    match scope {
        None => collect_grants(
            db.stmt(concat!(
                "SELECT ",
                grant_columns!(),
                " FROM grants ORDER BY subject, capability, scope"
            ))?,
            [],
        ),
        Some(scope) => collect_grants(
            db.stmt(concat!(
                "SELECT ",
                grant_columns!(),
                " FROM grants WHERE scope = ?1 ORDER BY subject, capability"
            ))?,
            params![scope],
        ),
    }
}

fn grants_for(db: &mut Db<'_>, subjects: &[String], scopes: &[String]) -> Result<Vec<Grant>> {
    if subjects.is_empty() || scopes.is_empty() {
        return Ok(Vec::new());
    }
    // The lists travel as JSON arrays so that one cached statement serves
    // every length.
    let subjects = to_json(subjects, "grant subjects")?;
    let scopes = to_json(scopes, "grant scopes")?;
    collect_grants(
        db.stmt(concat!(
            "SELECT ",
            grant_columns!(),
            " FROM grants WHERE subject IN (SELECT value FROM json_each(?1)) \
             AND scope IN (SELECT value FROM json_each(?2)) \
             ORDER BY subject, capability, scope"
        ))?,
        params![subjects, scopes],
    )
}

pub(super) fn append_audit(db: &mut Db<'_>, event: &AuditEvent) -> Result<()> {
    db.stmt(
        "INSERT INTO audit (at, actor, action, target, outcome, capability, scope) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        event.at,
        event.actor,
        event.action,
        event.target,
        event.outcome,
        event.capability,
        event.scope
    ])?;
    Ok(())
}

fn list_audit(db: &mut Db<'_>, limit: u32) -> Result<Vec<AuditEvent>> {
    let limit = audit_limit(limit);
    let stmt = db.stmt(
        "SELECT at, actor, action, target, outcome, capability, scope FROM audit \
         ORDER BY at DESC, id DESC LIMIT ?1",
    )?;
    let mut out = Vec::new();
    let mut found = stmt.query(params![limit])?;
    while let Some(row) = found.next()? {
        out.push(AuditEvent {
            at: col(row, 0)?,
            actor: col(row, 1)?,
            action: col(row, 2)?,
            target: col(row, 3)?,
            outcome: col(row, 4)?,
            capability: col(row, 5)?,
            scope: col(row, 6)?,
        });
    }
    Ok(out)
}

#[async_trait::async_trait]
impl GrantStore for SqliteStore {
    async fn add_grant(&self, grant: Grant) -> Result<bool> {
        self.write(move |db| add_grant(db, &grant)).await
    }

    async fn add_grant_audited(&self, grant: Grant, event: AuditEvent) -> Result<bool> {
        self.write(move |db| add_grant_audited(db, &grant, &event))
            .await
    }

    async fn remove_grant(&self, subject: &str, capability: &str, scope: &str) -> Result<bool> {
        let (subject, capability, scope) =
            (subject.to_owned(), capability.to_owned(), scope.to_owned());
        self.write(move |db| remove_grant(db, &subject, &capability, &scope))
            .await
    }

    async fn remove_grant_audited(
        &self,
        subject: &str,
        capability: &str,
        scope: &str,
        event: AuditEvent,
    ) -> Result<bool> {
        let (subject, capability, scope) =
            (subject.to_owned(), capability.to_owned(), scope.to_owned());
        self.write(move |db| remove_grant_audited(db, &subject, &capability, &scope, &event))
            .await
    }

    async fn list_grants(&self, scope: Option<&str>) -> Result<Vec<Grant>> {
        let scope = scope.map(str::to_owned);
        self.read(move |db| list_grants(db, scope.as_deref())).await
    }

    async fn grants_for(&self, subjects: &[String], scopes: &[String]) -> Result<Vec<Grant>> {
        let (subjects, scopes) = (subjects.to_vec(), scopes.to_vec());
        self.read(move |db| grants_for(db, &subjects, &scopes))
            .await
    }

    async fn append_audit(&self, event: AuditEvent) -> Result<()> {
        self.write(move |db| append_audit(db, &event)).await
    }

    async fn list_audit(&self, limit: u32) -> Result<Vec<AuditEvent>> {
        self.read(move |db| list_audit(db, limit)).await
    }
}
