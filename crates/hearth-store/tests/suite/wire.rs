//! A proxy between a store and the test server that counts what the store
//! sends, read from the wire: the statements PostgreSQL runs (a simple
//! query, or an `Execute` of the extended protocol: what `log_statement =
//! 'all'` logs, as `crates/hearth-bench/pg-statements-per-run.sh` counts
//! them) and the transactions they make (a `BEGIN` .. `COMMIT` is one; a
//! statement outside one is one).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio_postgres::config::Host;

/// What the store sent since the last [`Wire::take`].
#[derive(Debug, Default)]
pub struct Counted {
    /// Each statement's SQL, in the order sent (of all connections).
    pub statements: Vec<String>,
    /// How many transactions they made.
    pub transactions: usize,
}

/// The proxy: listens on 127.0.0.1, each connection forwarded to the
/// server of the URL it was started with.
pub struct Wire {
    url: String,
    counted: Arc<Mutex<Counted>>,
}

enum Upstream {
    Tcp(String),
    Unix(PathBuf),
}

impl Wire {
    /// A proxy to the server and database of `url`.
    pub async fn start(url: &str) -> Wire {
        let config: tokio_postgres::Config = url.parse().unwrap();
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let upstream = match config.get_hosts().first() {
            Some(Host::Tcp(host)) => Upstream::Tcp(format!("{host}:{port}")),
            Some(Host::Unix(dir)) => Upstream::Unix(dir.join(format!(".s.PGSQL.{port}"))),
            None => Upstream::Tcp(format!("localhost:{port}")),
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let user = encode(config.get_user().unwrap_or("postgres").as_bytes());
        let password = config
            .get_password()
            .map(|p| format!(":{}", encode(p)))
            .unwrap_or_default();
        let db = encode(config.get_dbname().unwrap().as_bytes());
        let counted = Arc::new(Mutex::new(Counted::default()));
        let upstream = Arc::new(upstream);
        let shared = counted.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let counted = shared.clone();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    match &*upstream {
                        Upstream::Tcp(addr) => {
                            let server = TcpStream::connect(addr).await.unwrap();
                            pump(client, server, counted).await;
                        }
                        Upstream::Unix(path) => {
                            let server = UnixStream::connect(path).await.unwrap();
                            pump(client, server, counted).await;
                        }
                    }
                });
            }
        });
        Wire {
            url: format!("postgres://{user}{password}@{addr}/{db}"),
            counted,
        }
    }

    /// The URL that reaches the database through the proxy.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What was sent since the last call.
    pub fn take(&self) -> Counted {
        std::mem::take(&mut *self.counted.lock().unwrap())
    }
}

/// Percent-encodes everything but letters and digits.
fn encode(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| {
            if b.is_ascii_alphanumeric() {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Forwards both ways; reads the client's messages as they pass.
async fn pump<S>(client: TcpStream, server: S, counted: Arc<Mutex<Counted>>)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = tokio::io::split(server);
    let back = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_rx, &mut client_tx).await;
    });
    let _ = forward(&mut client_rx, &mut server_tx, &counted).await;
    let _ = server_tx.shutdown().await;
    let _ = back.await;
}

/// Whether a statement opens or ends a transaction block.
fn block(sql: &str) -> Option<bool> {
    match sql
        .trim()
        .trim_end_matches(';')
        .to_ascii_uppercase()
        .as_str()
    {
        "BEGIN" | "START TRANSACTION" => Some(true),
        "COMMIT" | "ROLLBACK" | "END" => Some(false),
        _ => None,
    }
}

/// The C string at the start of `body`, and what follows it.
fn cstr(body: &[u8]) -> (String, &[u8]) {
    let end = body.iter().position(|&b| b == 0).unwrap_or(body.len());
    let rest = body.get(end + 1..).unwrap_or(&[]);
    (String::from_utf8_lossy(&body[..end]).into_owned(), rest)
}

/// Forwards the client's messages to the server, counting as they pass.
async fn forward<R, W>(rx: &mut R, tx: &mut W, counted: &Mutex<Counted>) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    // The start-up packets have no type byte (an SSL or GSS request is
    // followed by another).
    loop {
        let len = rx.read_u32().await?;
        let mut body = vec![0; len as usize - 4];
        rx.read_exact(&mut body).await?;
        tx.write_u32(len).await?;
        tx.write_all(&body).await?;
        let code = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
        if code != 80_877_103 && code != 80_877_104 {
            break;
        }
    }
    let mut statements: HashMap<String, String> = HashMap::new();
    let mut portals: HashMap<String, String> = HashMap::new();
    let mut inside = false;
    let mut unsynced = false;
    loop {
        let kind = rx.read_u8().await?;
        let len = rx.read_u32().await?;
        let mut body = vec![0; len as usize - 4];
        rx.read_exact(&mut body).await?;
        tx.write_u8(kind).await?;
        tx.write_u32(len).await?;
        tx.write_all(&body).await?;
        let mut c = counted.lock().unwrap();
        match kind {
            b'Q' => {
                let (sql, _) = cstr(&body);
                match block(&sql) {
                    Some(true) => {
                        inside = true;
                        c.transactions += 1;
                    }
                    Some(false) => inside = false,
                    None if !inside => c.transactions += 1,
                    None => {}
                }
                c.statements.push(sql);
            }
            b'P' => {
                let (name, rest) = cstr(&body);
                let (sql, _) = cstr(rest);
                statements.insert(name, sql);
            }
            b'B' => {
                let (portal, rest) = cstr(&body);
                let (name, _) = cstr(rest);
                let sql = statements.get(&name).cloned().unwrap_or_default();
                portals.insert(portal, sql);
            }
            b'E' => {
                let (portal, _) = cstr(&body);
                let sql = portals.get(&portal).cloned().unwrap_or_default();
                match block(&sql) {
                    Some(true) => {
                        inside = true;
                        c.transactions += 1;
                    }
                    Some(false) => inside = false,
                    // Outside a block, the statements up to the next Sync
                    // are one implicit transaction.
                    None if !inside => unsynced = true,
                    None => {}
                }
                c.statements.push(sql);
            }
            b'S' if std::mem::take(&mut unsynced) => c.transactions += 1,
            b'X' => return Ok(()),
            _ => {}
        }
    }
}
