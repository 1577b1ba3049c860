//! One value in the form both backends compare in, and the checksum of a
//! table's rows.
//!
//! A column's [`Kind`] comes from its PostgreSQL type; a SQLite value is read
//! as that kind (an INTEGER 0/1 of a BOOLEAN column is a boolean), so a row
//! read back from either database gives the same [`Cell`]s when it holds the
//! same data.

use sha2::{Digest, Sha256};
use tokio_postgres::types::{ToSql, Type};

/// What a column holds, by its PostgreSQL type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Int8,
    Int4,
    Int2,
    /// BOOLEAN; INTEGER 0/1 on SQLite.
    Bool,
    /// TEXT or VARCHAR (JSON is TEXT on both).
    Text,
    /// BYTEA; BLOB on SQLite.
    Bytes,
    Float8,
    Float4,
}

impl Kind {
    /// The kind of a PostgreSQL column type (`udt_name`), `None` when the
    /// copy does not know the type.
    pub(super) fn of_udt(udt: &str) -> Option<Kind> {
        Some(match udt {
            "int8" => Kind::Int8,
            "int4" => Kind::Int4,
            "int2" => Kind::Int2,
            "bool" => Kind::Bool,
            "text" | "varchar" | "bpchar" => Kind::Text,
            "bytea" => Kind::Bytes,
            "float8" => Kind::Float8,
            "float4" => Kind::Float4,
            _ => return None,
        })
    }

    /// The type binary COPY writes the column as.
    pub(super) fn pg_type(self, udt: &str) -> Type {
        match self {
            Kind::Int8 => Type::INT8,
            Kind::Int4 => Type::INT4,
            Kind::Int2 => Type::INT2,
            Kind::Bool => Type::BOOL,
            Kind::Text if udt == "varchar" => Type::VARCHAR,
            Kind::Text if udt == "bpchar" => Type::BPCHAR,
            Kind::Text => Type::TEXT,
            Kind::Bytes => Type::BYTEA,
            Kind::Float8 => Type::FLOAT8,
            Kind::Float4 => Type::FLOAT4,
        }
    }

    /// Whether rows are ordered by this column byte-wise (PostgreSQL orders
    /// text by the database's collation unless told `COLLATE "C"`; SQLite's
    /// default BINARY collation is byte order).
    pub(super) fn is_text(self) -> bool {
        self == Kind::Text
    }
}

/// One value, as both backends compare it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Cell {
    Null,
    /// Integers and booleans (0 or 1).
    Int(i64),
    Real(f64),
    Text(String),
    Bytes(Vec<u8>),
}

impl Cell {
    /// A SQLite value read as a column of `kind`.
    pub(super) fn from_sqlite(
        value: rusqlite::types::ValueRef<'_>,
        kind: Kind,
    ) -> Result<Cell, String> {
        use rusqlite::types::ValueRef as V;
        Ok(match (kind, value) {
            (_, V::Null) => Cell::Null,
            (Kind::Int8 | Kind::Int4 | Kind::Int2, V::Integer(i)) => Cell::Int(i),
            (Kind::Bool, V::Integer(i)) => Cell::Int(i64::from(i != 0)),
            // As the PostgreSQL store writes text (`storable`): a NUL, which
            // SQLite holds and PostgreSQL refuses, arrives as U+FFFD, and
            // the checksum of the SQLite side is taken of the same value.
            (Kind::Text, V::Text(bytes)) => Cell::Text(
                String::from_utf8(bytes.to_vec())
                    .map(|text| match super::super::storable(&text) {
                        std::borrow::Cow::Borrowed(_) => text,
                        std::borrow::Cow::Owned(mapped) => mapped,
                    })
                    .map_err(|_| "a text value that is not UTF-8".to_owned())?,
            ),
            // TEXT affinity stores numbers as text; a column declared
            // without a type may still hold one.
            (Kind::Text, V::Integer(i)) => Cell::Text(i.to_string()),
            (Kind::Bytes, V::Blob(bytes) | V::Text(bytes)) => Cell::Bytes(bytes.to_vec()),
            (Kind::Float8 | Kind::Float4, V::Real(f)) => Cell::Real(f),
            #[expect(
                clippy::cast_precision_loss,
                reason = "an integer in a floating-point column is read as SQLite reads it"
            )]
            (Kind::Float8 | Kind::Float4, V::Integer(i)) => Cell::Real(i as f64),
            (kind, other) => {
                return Err(format!(
                    "a SQLite {} value where PostgreSQL has {kind:?}",
                    other.data_type()
                ));
            }
        })
    }

    /// Column `i` of a PostgreSQL row, a column of `kind`.
    pub(super) fn from_postgres(
        row: &tokio_postgres::Row,
        i: usize,
        kind: Kind,
    ) -> Result<Cell, tokio_postgres::Error> {
        let cell = match kind {
            Kind::Int8 => row.try_get::<_, Option<i64>>(i)?.map(Cell::Int),
            Kind::Int4 => row
                .try_get::<_, Option<i32>>(i)?
                .map(|v| Cell::Int(i64::from(v))),
            Kind::Int2 => row
                .try_get::<_, Option<i16>>(i)?
                .map(|v| Cell::Int(i64::from(v))),
            Kind::Bool => row
                .try_get::<_, Option<bool>>(i)?
                .map(|v| Cell::Int(i64::from(v))),
            Kind::Text => row.try_get::<_, Option<String>>(i)?.map(Cell::Text),
            Kind::Bytes => row.try_get::<_, Option<Vec<u8>>>(i)?.map(Cell::Bytes),
            Kind::Float8 => row.try_get::<_, Option<f64>>(i)?.map(Cell::Real),
            Kind::Float4 => row
                .try_get::<_, Option<f32>>(i)?
                .map(|v| Cell::Real(f64::from(v))),
        };
        Ok(cell.unwrap_or(Cell::Null))
    }

    /// The value as a COPY parameter of `kind`; `Err` says why it does not
    /// fit (an integer out of the column's range).
    pub(super) fn into_param(self, kind: Kind) -> Result<Box<dyn ToSql + Sync + Send>, String> {
        let range = |i: i64| format!("{i} does not fit the PostgreSQL column ({kind:?})");
        Ok(match (kind, self) {
            (Kind::Int8, Cell::Int(i)) => Box::new(i),
            (Kind::Int8, Cell::Null) => Box::new(None::<i64>),
            (Kind::Int4, Cell::Int(i)) => Box::new(i32::try_from(i).map_err(|_| range(i))?),
            (Kind::Int4, Cell::Null) => Box::new(None::<i32>),
            (Kind::Int2, Cell::Int(i)) => Box::new(i16::try_from(i).map_err(|_| range(i))?),
            (Kind::Int2, Cell::Null) => Box::new(None::<i16>),
            (Kind::Bool, Cell::Int(i)) => Box::new(i != 0),
            (Kind::Bool, Cell::Null) => Box::new(None::<bool>),
            (Kind::Text, Cell::Text(s)) => Box::new(s),
            (Kind::Text, Cell::Null) => Box::new(None::<String>),
            (Kind::Bytes, Cell::Bytes(b)) => Box::new(b),
            (Kind::Bytes, Cell::Null) => Box::new(None::<Vec<u8>>),
            (Kind::Float8, Cell::Real(f)) => Box::new(f),
            (Kind::Float8, Cell::Null) => Box::new(None::<f64>),
            #[expect(
                clippy::cast_possible_truncation,
                reason = "a REAL column holds f32 values"
            )]
            (Kind::Float4, Cell::Real(f)) => Box::new(f as f32),
            (Kind::Float4, Cell::Null) => Box::new(None::<f32>),
            (kind, cell) => return Err(format!("{cell:?} cannot go into a {kind:?} column")),
        })
    }
}

/// A table's row count and the SHA-256 of its rows in primary-key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDigest {
    /// Rows read.
    pub rows: u64,
    /// Lowercase hex SHA-256 over the canonical form of every row.
    pub checksum: String,
}

/// Computes a [`TableDigest`] row by row.
pub(super) struct Digester {
    hash: Sha256,
    rows: u64,
}

impl Digester {
    pub(super) fn new() -> Self {
        Digester {
            hash: Sha256::new(),
            rows: 0,
        }
    }

    /// Adds one row. Each value is a tag and a length-prefixed body, so no
    /// two different rows feed the same bytes (NULL differs from "", 1 from
    /// "1", a text from the same bytes as a blob).
    pub(super) fn row(&mut self, cells: &[Cell]) {
        for cell in cells {
            match cell {
                Cell::Null => self.hash.update([0u8]),
                Cell::Int(i) => {
                    self.hash.update([1u8]);
                    self.hash.update(i.to_le_bytes());
                }
                Cell::Real(f) => {
                    self.hash.update([2u8]);
                    self.hash.update(f.to_bits().to_le_bytes());
                }
                Cell::Text(s) => {
                    self.hash.update([3u8]);
                    self.hash.update((s.len() as u64).to_le_bytes());
                    self.hash.update(s.as_bytes());
                }
                Cell::Bytes(b) => {
                    self.hash.update([4u8]);
                    self.hash.update((b.len() as u64).to_le_bytes());
                    self.hash.update(b);
                }
            }
        }
        self.hash.update([0xffu8]);
        self.rows += 1;
    }

    pub(super) fn finish(self) -> TableDigest {
        TableDigest {
            rows: self.rows,
            checksum: data_encoding::HEXLOWER.encode(&self.hash.finalize()),
        }
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::types::ValueRef;

    use super::*;

    fn digest(rows: &[Vec<Cell>]) -> TableDigest {
        let mut d = Digester::new();
        for r in rows {
            d.row(r);
        }
        d.finish()
    }

    #[test]
    fn a_sqlite_integer_boolean_reads_as_the_postgres_boolean() {
        assert_eq!(
            Cell::from_sqlite(ValueRef::Integer(1), Kind::Bool),
            Ok(Cell::Int(1))
        );
        assert_eq!(
            Cell::from_sqlite(ValueRef::Integer(0), Kind::Bool),
            Ok(Cell::Int(0))
        );
        assert_eq!(
            Cell::from_sqlite(ValueRef::Blob(b"\x01\x02"), Kind::Bytes),
            Ok(Cell::Bytes(vec![1, 2]))
        );
        assert!(Cell::from_sqlite(ValueRef::Blob(b"x"), Kind::Int8).is_err());
    }

    #[test]
    fn a_nul_in_sqlite_text_reads_as_the_replacement_character() {
        assert_eq!(
            Cell::from_sqlite(ValueRef::Text(b"a\0b"), Kind::Text),
            Ok(Cell::Text("a\u{FFFD}b".into()))
        );
        assert_eq!(
            Cell::from_sqlite(ValueRef::Text(b"ab"), Kind::Text),
            Ok(Cell::Text("ab".into()))
        );
    }

    #[test]
    fn null_empty_text_and_blob_of_the_same_bytes_digest_differently() {
        let a = digest(&[vec![Cell::Null]]);
        let b = digest(&[vec![Cell::Text(String::new())]]);
        let c = digest(&[vec![Cell::Bytes(Vec::new())]]);
        let d = digest(&[vec![Cell::Text("ab".into())], vec![Cell::Text("c".into())]]);
        let e = digest(&[vec![Cell::Text("a".into())], vec![Cell::Text("bc".into())]]);
        assert_ne!(a, b);
        assert_ne!(b, c);
        assert_ne!(d.checksum, e.checksum);
        assert_eq!(d.rows, 2);
    }

    #[test]
    fn an_integer_too_wide_for_its_column_is_refused() {
        assert!(Cell::Int(1 << 40).into_param(Kind::Int4).is_err());
        assert!(Cell::Int(7).into_param(Kind::Int4).is_ok());
        assert!(Cell::Text("x".into()).into_param(Kind::Int8).is_err());
    }
}
