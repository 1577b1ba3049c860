//! `GET /v1/cluster`: the store and the replicas sharing it (operator).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::error::ApiError;

/// `GET /v1/cluster`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ClusterShown {
    /// `sqlite` or `postgres`.
    pub backend: String,
    /// The id of the replica that answered.
    pub this: String,
    /// The replicas alive (seen within three leases), by id; on SQLite the
    /// one process.
    pub replicas: Vec<ReplicaShown>,
}

/// One replica.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ReplicaShown {
    /// `<hostname>-<pid>-<4 hex>` (`proc_<uuid>` on SQLite).
    pub id: String,
    /// Where its HTTP API listens (empty when it serves none).
    pub addr: String,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// Its last heartbeat (RFC 3339).
    pub last_seen: String,
    /// Runs it was executing then.
    pub runs_executing: u64,
    /// The channels (`telegram`, `discord`, `slack`) and duties (`sweep`,
    /// `retention`, `jobs`) it holds.
    pub holds: Vec<String>,
}

/// The replicas sharing the store.
#[utoipa::path(get, path = "/v1/cluster", tag = "config",
    responses((status = 200, description = "The store and its replicas", body = ClusterShown),
              (status = 503, description = "The store cannot be read", body = crate::dto::ErrorBody)))]
pub async fn cluster(State(st): State<AppState>) -> Result<Json<ClusterShown>, ApiError> {
    let view = st.runtime.cluster().await?;
    Ok(Json(ClusterShown {
        backend: view.backend.to_owned(),
        this: view.this,
        replicas: view
            .replicas
            .into_iter()
            .map(|r| ReplicaShown {
                id: r.id,
                addr: r.addr,
                started_at: hearth_core::rfc3339(r.started_at),
                last_seen: hearth_core::rfc3339(r.last_seen),
                runs_executing: r.runs_executing,
                holds: r.holds,
            })
            .collect(),
    }))
}
