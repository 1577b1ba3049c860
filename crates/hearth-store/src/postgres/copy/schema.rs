//! Which SQLite table and column goes to which PostgreSQL one, read from the
//! two databases' own catalogs (so a table or column a later migration adds
//! on both sides is copied without a change here).

use std::collections::{BTreeMap, BTreeSet};

use deadpool_postgres::GenericClient;
use rusqlite::Connection;

use super::CopyError;
use super::cells::Kind;

/// PostgreSQL tables that have no SQLite counterpart and stay as they are:
/// migration bookkeeping, and what only several replicas need.
const POSTGRES_BOOKKEEPING: &str = "hearth_schema_migrations";

/// PostgreSQL columns filled from a SQLite expression other than a column
/// of the same name: `(table, column, SQLite expression)`.
const FROM_EXPRESSION: &[(&str, &str, &str)] = &[
    // SQLite orders tokens made in the same millisecond by their rowid;
    // PostgreSQL has an explicit identity column for it.
    ("api_tokens", "seq", "rowid"),
];

/// What SQLite has: every ordinary table with its columns, and the highest
/// id each AUTOINCREMENT table has ever handed out.
#[derive(Debug, Default)]
pub(super) struct SqliteSchema {
    pub(super) tables: BTreeMap<String, Vec<String>>,
    pub(super) sequences: BTreeMap<String, i64>,
}

/// SQLite tables of data derived from others, which PostgreSQL keeps its
/// own way: `memory_vector_versions` counts changes for SQLite's vectors
/// held in memory (PostgreSQL versions its blocks of vectors).
const DERIVED: &[&str] = &["memory_vector_versions"];

impl SqliteSchema {
    /// Reads the schema; full-text tables (virtual tables and their shadow
    /// tables), SQLite's own and [`DERIVED`] are left out: PostgreSQL indexes
    /// the text itself (`memories.tsv`).
    pub(super) fn read(conn: &Connection) -> Result<SqliteSchema, CopyError> {
        let mut stmt =
            conn.prepare("SELECT name, coalesce(sql, '') FROM sqlite_master WHERE type = 'table'")?;
        let all: Vec<(String, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let virtuals: Vec<&str> = all
            .iter()
            .filter(|(_, sql)| sql.to_ascii_uppercase().starts_with("CREATE VIRTUAL TABLE"))
            .map(|(name, _)| name.as_str())
            .collect();
        let mut schema = SqliteSchema::default();
        for (name, _) in &all {
            let internal = name.starts_with("sqlite_");
            let index = virtuals
                .iter()
                .any(|v| name == v || name.starts_with(&format!("{v}_")));
            if internal || index || DERIVED.contains(&name.as_str()) {
                continue;
            }
            let mut cols = conn.prepare(&format!("PRAGMA table_info({})", quote(name)))?;
            let names: Vec<String> = cols
                .query_map([], |r| r.get(1))?
                .collect::<rusqlite::Result<_>>()?;
            schema.tables.insert(name.clone(), names);
        }
        if all.iter().any(|(n, _)| n == "sqlite_sequence") {
            let mut stmt = conn.prepare("SELECT name, seq FROM sqlite_sequence")?;
            let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
            for row in rows {
                let (name, seq) = row?;
                schema.sequences.insert(name, seq);
            }
        }
        Ok(schema)
    }
}

/// One column of a copied table.
#[derive(Debug, Clone)]
pub(super) struct ColumnPlan {
    /// The PostgreSQL column.
    pub(super) name: String,
    /// What SQLite reads for it (a quoted column, or `rowid`).
    pub(super) sqlite_expr: String,
    pub(super) kind: Kind,
    pub(super) udt: String,
    /// An identity column: its sequence is set past the copied ids.
    pub(super) identity: bool,
}

/// How one table is copied and compared.
#[derive(Debug, Clone)]
pub(super) struct TablePlan {
    pub(super) name: String,
    pub(super) columns: Vec<ColumnPlan>,
    /// Indexes into `columns` of the primary key (or every column when the
    /// table has none), the order both sides are read in.
    pub(super) order: Vec<usize>,
}

impl TablePlan {
    /// The SQLite query that reads the table in key order.
    pub(super) fn sqlite_select(&self) -> String {
        let cols: Vec<&str> = self
            .columns
            .iter()
            .map(|c| c.sqlite_expr.as_str())
            .collect();
        let order: Vec<&str> = self
            .order
            .iter()
            .map(|&i| self.columns[i].sqlite_expr.as_str())
            .collect();
        format!(
            "SELECT {} FROM {} ORDER BY {}",
            cols.join(", "),
            quote(&self.name),
            order.join(", ")
        )
    }

    /// The PostgreSQL query that reads the table in the same order.
    pub(super) fn postgres_select(&self) -> String {
        let cols: Vec<String> = self.columns.iter().map(|c| quote(&c.name)).collect();
        let order: Vec<String> = self
            .order
            .iter()
            .map(|&i| {
                let c = &self.columns[i];
                if c.kind.is_text() {
                    format!("{} COLLATE \"C\"", quote(&c.name))
                } else {
                    quote(&c.name)
                }
            })
            .collect();
        format!(
            "SELECT {} FROM {} ORDER BY {}",
            cols.join(", "),
            quote(&self.name),
            order.join(", ")
        )
    }

    /// The binary COPY statement that writes the table.
    pub(super) fn copy_in(&self) -> String {
        let cols: Vec<String> = self.columns.iter().map(|c| quote(&c.name)).collect();
        format!(
            "COPY {} ({}) FROM STDIN (FORMAT binary)",
            quote(&self.name),
            cols.join(", ")
        )
    }
}

/// The copy's plan: tables to copy, parents before children, and the
/// PostgreSQL tables that stay empty.
#[derive(Debug)]
pub(super) struct Plan {
    pub(super) tables: Vec<TablePlan>,
    /// Tables only PostgreSQL has (replicas, leases, ...), left empty.
    pub(super) postgres_only: Vec<String>,
    /// Every PostgreSQL table that must be empty before the copy.
    pub(super) must_be_empty: Vec<String>,
}

struct PgColumn {
    name: String,
    udt: String,
    generated: bool,
    identity: bool,
}

/// Matches the two schemas. A SQLite table or column PostgreSQL lacks is an
/// error (its data would be lost); a PostgreSQL column SQLite lacks takes
/// its default and is not compared.
pub(super) async fn plan(
    client: &impl GenericClient,
    sqlite: &SqliteSchema,
) -> Result<Plan, CopyError> {
    let rows = client
        .query(
            "SELECT table_name::text FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' \
             ORDER BY table_name",
            &[],
        )
        .await?;
    let pg_tables: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    for table in sqlite.tables.keys() {
        if !pg_tables.contains(table) {
            return Err(CopyError::Unmapped {
                table: table.clone(),
            });
        }
    }
    let mut tables = Vec::new();
    let mut postgres_only = Vec::new();
    for table in &pg_tables {
        let Some(sqlite_cols) = sqlite.tables.get(table) else {
            if table != POSTGRES_BOOKKEEPING {
                postgres_only.push(table.clone());
            }
            continue;
        };
        tables.push(table_plan(client, table, sqlite_cols).await?);
    }
    let tables = parents_first(client, tables).await?;
    let must_be_empty = pg_tables
        .into_iter()
        .filter(|t| t != POSTGRES_BOOKKEEPING)
        .collect();
    Ok(Plan {
        tables,
        postgres_only,
        must_be_empty,
    })
}

async fn table_plan(
    client: &impl GenericClient,
    table: &str,
    sqlite_cols: &[String],
) -> Result<TablePlan, CopyError> {
    let rows = client
        .query(
            "SELECT column_name::text, udt_name::text, is_generated::text, is_identity::text \
             FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = $1 \
             ORDER BY ordinal_position",
            &[&table],
        )
        .await?;
    let pg_cols: Vec<PgColumn> = rows
        .iter()
        .map(|r| PgColumn {
            name: r.get(0),
            udt: r.get(1),
            generated: r.get::<_, String>(2) == "ALWAYS",
            identity: r.get::<_, String>(3) == "YES",
        })
        .collect();
    for col in sqlite_cols {
        if !pg_cols.iter().any(|c| &c.name == col && !c.generated) {
            return Err(CopyError::UnmappedColumn {
                table: table.to_owned(),
                column: col.clone(),
            });
        }
    }
    let mut columns = Vec::new();
    for c in pg_cols.iter().filter(|c| !c.generated) {
        let expr = if sqlite_cols.contains(&c.name) {
            quote(&c.name)
        } else if let Some((_, _, expr)) = FROM_EXPRESSION
            .iter()
            .find(|(t, col, _)| *t == table && *col == c.name)
        {
            (*expr).to_owned()
        } else {
            continue;
        };
        let kind = Kind::of_udt(&c.udt).ok_or_else(|| CopyError::Value {
            table: table.to_owned(),
            column: c.name.clone(),
            reason: format!("PostgreSQL type {} is not one the copy knows", c.udt),
        })?;
        columns.push(ColumnPlan {
            name: c.name.clone(),
            sqlite_expr: expr,
            kind,
            udt: c.udt.clone(),
            identity: c.identity,
        });
    }
    let key = primary_key(client, table).await?;
    let mut order: Vec<usize> = key
        .iter()
        .filter_map(|k| columns.iter().position(|c| &c.name == k))
        .collect();
    if order.len() != key.len() || order.is_empty() {
        order = (0..columns.len()).collect();
    }
    Ok(TablePlan {
        name: table.to_owned(),
        columns,
        order,
    })
}

async fn primary_key(client: &impl GenericClient, table: &str) -> Result<Vec<String>, CopyError> {
    let rows = client
        .query(
            "SELECT a.attname::text FROM pg_index i \
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey) \
             WHERE i.indrelid = $1::text::regclass AND i.indisprimary \
             ORDER BY array_position(i.indkey::int2[], a.attnum)",
            &[&quote(table)],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Orders tables so that each comes after the tables its foreign keys
/// reference (`run_steps` after `runs`): the copy writes them in one
/// transaction, where every row is checked as it is written.
async fn parents_first(
    client: &impl GenericClient,
    tables: Vec<TablePlan>,
) -> Result<Vec<TablePlan>, CopyError> {
    let rows = client
        .query(
            "SELECT c.relname::text, p.relname::text FROM pg_constraint k \
             JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class p ON p.oid = k.confrelid \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE k.contype = 'f' AND n.nspname = current_schema()",
            &[],
        )
        .await?;
    let mut parents: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in &rows {
        let (child, parent): (String, String) = (r.get(0), r.get(1));
        if child != parent {
            parents.entry(child).or_default().insert(parent);
        }
    }
    let names: BTreeSet<String> = tables.iter().map(|t| t.name.clone()).collect();
    let mut left = tables;
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut ordered = Vec::with_capacity(left.len());
    while !left.is_empty() {
        let ready = |t: &TablePlan| {
            parents
                .get(&t.name)
                .is_none_or(|ps| ps.iter().all(|p| done.contains(p) || !names.contains(p)))
        };
        let (now, later): (Vec<_>, Vec<_>) = left.into_iter().partition(|t| ready(t));
        if now.is_empty() {
            // A cycle of foreign keys: no order satisfies it row by row.
            return Err(CopyError::Value {
                table: later.first().map(|t| t.name.clone()).unwrap_or_default(),
                column: String::new(),
                reason: "its foreign keys form a cycle the copy cannot order".into(),
            });
        }
        for t in now {
            done.insert(t.name.clone());
            ordered.push(t);
        }
        left = later;
    }
    Ok(ordered)
}

/// An identifier quoted for SQL (both SQLite and PostgreSQL accept
/// double quotes).
pub(super) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
