//! `/v1/channels`, `/v1/pairings` and `/v1/outbox`: the chat channels'
//! state, pairing approvals and the outbox of replies (ids and states only,
//! never message text).

use axum::Json;
use axum::extract::Extension;
use std::sync::Arc;

use hearth_core::records::outbox::{OutboxItem, OutboxStatus, PairingRecord};
use hearth_core::{CHANNEL_NAMES, Removed, rfc3339};
use hearth_runtime::surfaces::ChannelAdmin;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::ApiError;
use crate::extract::{ApiPath, ApiQuery, page_limit};

/// The channels of the runtime, asked for at each request: a configuration
/// reload may replace them.
#[derive(Clone)]
pub struct ChannelsHandle(pub hearth_runtime::Runtime);

impl ChannelsHandle {
    /// The channels in force, or none (a runtime built without them).
    fn admin(&self) -> Option<Arc<dyn ChannelAdmin>> {
        self.0.channels()
    }

    fn get(&self) -> Result<Arc<dyn ChannelAdmin>, ApiError> {
        self.admin().ok_or_else(|| {
            ApiError::Unavailable("the chat channels are not running in this process".into())
        })
    }
}

/// One channel.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ChannelDto {
    /// `telegram`, `discord`, `slack` or `sms`.
    pub name: String,
    /// Enabled in `hearth.toml`.
    pub enabled: bool,
    /// `disabled`, `connecting`, `connected`, `degraded` or `standby` (another
    /// replica sharing the store holds its connection).
    pub state: String,
    /// The last failure.
    pub last_error: Option<String>,
    /// When the last platform event was handled (RFC 3339).
    pub last_event_at: Option<String>,
    /// Replies not yet delivered.
    pub outbox_pending: u64,
}

/// `GET /v1/channels`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ChannelList {
    /// Every channel hearth knows, enabled or not.
    pub channels: Vec<ChannelDto>,
}

/// The chat channels and their state.
#[utoipa::path(get, path = "/v1/channels", tag = "channels",
    responses((status = 200, description = "Every channel", body = ChannelList)))]
pub async fn list_channels(
    Extension(ch): Extension<ChannelsHandle>,
) -> Result<Json<ChannelList>, ApiError> {
    let channels = match &ch.admin() {
        Some(c) => c
            .list()
            .await?
            .into_iter()
            .map(|i| ChannelDto {
                name: i.name.into(),
                enabled: i.enabled,
                state: i.state.as_str().into(),
                last_error: i.last_error,
                last_event_at: i.last_event_at.map(rfc3339),
                outbox_pending: i.outbox_pending,
            })
            .collect(),
        None => CHANNEL_NAMES
            .iter()
            .map(|n| ChannelDto {
                name: (*n).into(),
                enabled: false,
                state: "disabled".into(),
                last_error: None,
                last_event_at: None,
                outbox_pending: 0,
            })
            .collect(),
    };
    Ok(Json(ChannelList { channels }))
}

/// A pending pairing request.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PairingDto {
    /// The code to approve.
    pub code: String,
    /// `telegram`, `discord`, `slack` or `sms`.
    pub channel: String,
    /// Who asked.
    pub user_key: String,
    /// Their name on the platform.
    pub display_name: String,
    /// When (RFC 3339).
    pub requested_at: String,
    /// When the code expires (RFC 3339).
    pub expires_at: String,
}

impl From<PairingRecord> for PairingDto {
    fn from(p: PairingRecord) -> Self {
        Self {
            code: p.code,
            channel: p.channel,
            user_key: p.user_key,
            display_name: p.display_name,
            requested_at: rfc3339(p.requested_at),
            expires_at: rfc3339(p.expires_at),
        }
    }
}

/// `GET /v1/pairings`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PairingList {
    /// Pending requests, oldest first.
    pub pairings: Vec<PairingDto>,
}

/// Pending pairing requests.
#[utoipa::path(get, path = "/v1/pairings", tag = "channels",
    responses((status = 200, description = "Pending requests", body = PairingList)))]
pub async fn list_pairings(
    Extension(ch): Extension<ChannelsHandle>,
) -> Result<Json<PairingList>, ApiError> {
    let pairings = match &ch.admin() {
        Some(c) => c
            .pairings()
            .await?
            .into_iter()
            .map(PairingDto::from)
            .collect(),
        None => Vec::new(),
    };
    Ok(Json(PairingList { pairings }))
}

/// `POST /v1/pairings/{code}/approve`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Approved {
    /// `telegram`, `discord`, `slack` or `sms`.
    pub channel: String,
    /// The user now let in.
    pub user_key: String,
}

fn no_code(code: &str) -> ApiError {
    ApiError::NotFound(format!(
        "no pending pairing has code {code:?}: it is unknown, already used or expired (see GET /v1/pairings)"
    ))
}

/// Approves a pairing code: the user is let in and told.
#[utoipa::path(post, path = "/v1/pairings/{code}/approve", tag = "channels",
    params(("code" = String, Path, description = "The pairing code")),
    responses((status = 200, description = "Approved", body = Approved),
        (status = 404, description = "Unknown, used or expired code", body = crate::dto::ErrorBody)))]
pub async fn approve_pairing(
    Extension(ch): Extension<ChannelsHandle>,
    ApiPath(code): ApiPath<String>,
) -> Result<Json<Approved>, ApiError> {
    let code = code.trim().to_uppercase();
    let rec = ch
        .get()?
        .approve_pairing(&code)
        .await?
        .ok_or_else(|| no_code(&code))?;
    Ok(Json(Approved {
        channel: rec.channel,
        user_key: rec.user_key,
    }))
}

/// `POST /v1/pairings/{code}/deny`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Denied {
    /// `telegram`, `discord`, `slack` or `sms`.
    pub channel: String,
    /// The user refused.
    pub user_key: String,
}

/// Denies a pairing code (the user is not told).
#[utoipa::path(post, path = "/v1/pairings/{code}/deny", tag = "channels",
    params(("code" = String, Path, description = "The pairing code")),
    responses((status = 200, description = "Denied", body = Denied),
        (status = 404, description = "Unknown, used or expired code", body = crate::dto::ErrorBody)))]
pub async fn deny_pairing(
    Extension(ch): Extension<ChannelsHandle>,
    ApiPath(code): ApiPath<String>,
) -> Result<Json<Denied>, ApiError> {
    let code = code.trim().to_uppercase();
    let rec = ch
        .get()?
        .deny_pairing(&code)
        .await?
        .ok_or_else(|| no_code(&code))?;
    Ok(Json(Denied {
        channel: rec.channel,
        user_key: rec.user_key,
    }))
}

/// A user let in on a channel.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AllowedDto {
    /// `telegram:user:<id>`.
    pub user_key: String,
    /// When they were approved (RFC 3339); null for users listed in `hearth.toml`.
    pub added_at: Option<String>,
    /// `config` or `pairing`.
    pub via: String,
}

/// `GET /v1/channels/{name}/allowed`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AllowedList {
    /// Config entries first, then paired users.
    pub users: Vec<AllowedDto>,
}

fn no_channel(name: &str) -> ApiError {
    ApiError::NotFound(format!(
        "no channel named {name:?}: the channels are telegram, discord, slack and sms"
    ))
}

/// Users let in on a channel.
#[utoipa::path(get, path = "/v1/channels/{name}/allowed", tag = "channels",
    params(("name" = String, Path, description = "telegram, discord, slack or sms")),
    responses((status = 200, description = "Allowed users", body = AllowedList),
        (status = 404, description = "No such channel", body = crate::dto::ErrorBody)))]
pub async fn list_allowed(
    Extension(ch): Extension<ChannelsHandle>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<AllowedList>, ApiError> {
    let users = ch
        .get()?
        .allowed(&name)
        .await?
        .ok_or_else(|| no_channel(&name))?;
    Ok(Json(AllowedList {
        users: users
            .into_iter()
            .map(|u| AllowedDto {
                user_key: u.user_key,
                added_at: u.added_at.map(rfc3339),
                via: u.via.into(),
            })
            .collect(),
    }))
}

/// `DELETE /v1/channels/{name}/allowed/{user_key}`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RemovedDto {
    /// `telegram`, `discord`, `slack` or `sms`.
    pub channel: String,
    /// The user no longer let in.
    pub user_key: String,
}

/// Removes a paired user (users listed in `hearth.toml` are removed there).
#[utoipa::path(delete, path = "/v1/channels/{name}/allowed/{user_key}", tag = "channels",
    params(("name" = String, Path, description = "telegram, discord, slack or sms"),
        ("user_key" = String, Path, description = "The user key")),
    responses((status = 200, description = "Removed", body = RemovedDto),
        (status = 404, description = "Not a paired user of this channel", body = crate::dto::ErrorBody)))]
pub async fn remove_allowed(
    Extension(ch): Extension<ChannelsHandle>,
    ApiPath((name, user_key)): ApiPath<(String, String)>,
) -> Result<Json<RemovedDto>, ApiError> {
    let channels = ch.get()?;
    if !CHANNEL_NAMES.contains(&name.as_str()) {
        return Err(no_channel(&name));
    }
    match channels.remove_allowed(&name, &user_key).await? {
        Removed::Yes => Ok(Json(RemovedDto {
            channel: name,
            user_key,
        })),
        Removed::NotFound => Err(ApiError::NotFound(format!(
            "{user_key} is not a paired user of {name}"
        ))),
        Removed::InConfig => Err(ApiError::NotFound(format!(
            "{user_key} is not a paired user of {name}: it is listed in allowed_users in hearth.toml; remove it there"
        ))),
    }
}

/// `GET /v1/outbox` parameters.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OutboxParams {
    /// `pending`, `failed` or `sent`; all when absent.
    #[param(value_type = Option<OutboxStatusName>)]
    pub status: Option<String>,
    /// At most this many (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

/// An outbox item's delivery state, as the API spells it.
#[derive(Debug, ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum OutboxStatusName {
    /// Waiting for (another) delivery attempt.
    Pending,
    /// Delivery failed for good (`POST /v1/outbox/{id}/retry` queues it again).
    Failed,
    /// Delivered.
    Sent,
}

/// One outbox item (never its text).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct OutboxDto {
    /// The item\'s id: increasing, the delivery order within a target.
    pub id: i64,
    /// `telegram`, `discord`, `slack` or `sms`.
    pub channel: String,
    /// The platform conversation id.
    pub target: String,
    /// `message`, `edit`, `prompt` or `delete`.
    pub kind: String,
    /// The run it belongs to.
    pub run_id: Option<String>,
    /// Failed delivery attempts.
    pub attempts: u32,
    /// `pending`, `sent` or `failed`.
    pub status: String,
    /// When the next attempt is due (RFC 3339; pending items).
    pub next_attempt_at: Option<String>,
    /// The last delivery error.
    pub last_error: Option<String>,
    /// When it was queued (RFC 3339).
    pub created_at: String,
}

impl From<OutboxItem> for OutboxDto {
    fn from(i: OutboxItem) -> Self {
        Self {
            id: i.id,
            channel: i.channel,
            target: i.target,
            kind: i.kind.as_str().into(),
            run_id: i.run_id,
            attempts: i.attempts,
            status: i.status.as_str().into(),
            next_attempt_at: i.next_attempt_at.map(rfc3339),
            last_error: i.last_error,
            created_at: rfc3339(i.created_at),
        }
    }
}

/// `GET /v1/outbox`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct OutboxList {
    /// Newest first.
    pub items: Vec<OutboxDto>,
}

/// Replies queued for the chat channels, newest first.
#[utoipa::path(get, path = "/v1/outbox", tag = "channels", params(OutboxParams),
    responses((status = 200, description = "Outbox items", body = OutboxList),
        (status = 400, body = crate::dto::ErrorBody)))]
pub async fn list_outbox(
    Extension(ch): Extension<ChannelsHandle>,
    ApiQuery(q): ApiQuery<OutboxParams>,
) -> Result<Json<OutboxList>, ApiError> {
    let status = match q.status.as_deref() {
        None => None,
        Some(s) => Some(OutboxStatus::parse(s).ok_or_else(|| {
            ApiError::InvalidRequest(format!("status {s:?} is not one of pending, failed, sent"))
        })?),
    };
    let limit = page_limit(q.limit, 100)?;
    let items = match &ch.admin() {
        Some(c) => c
            .outbox(status, limit)
            .await?
            .into_iter()
            .map(OutboxDto::from)
            .collect(),
        None => Vec::new(),
    };
    Ok(Json(OutboxList { items }))
}

/// Puts a failed outbox item back in its queue (for `hearth outbox retry`).
#[utoipa::path(post, path = "/v1/outbox/{id}/retry", tag = "channels",
    params(("id" = i64, Path, description = "The item's id")),
    responses((status = 200, description = "Queued again", body = OutboxDto),
        (status = 404, description = "No failed item has this id", body = crate::dto::ErrorBody)))]
pub async fn retry_outbox(
    Extension(ch): Extension<ChannelsHandle>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<OutboxDto>, ApiError> {
    let item = ch
        .get()?
        .retry_outbox(id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no failed outbox item has id {id}")))?;
    Ok(Json(item.into()))
}
