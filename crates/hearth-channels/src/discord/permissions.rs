//! `/permissions grant|revoke|list`: capabilities of a role or a user in
//! this guild's scope (`discord:guild:<id>`), for the guild owner and
//! members with Administrator. Grants are stored and audited through the
//! runtime, like `POST /v1/permissions/grants`.

use hearth_core::now_ms;
use hearth_core::records::{AuditEvent, Grant};
use hearth_runtime::policy::known_capability_names;

use super::interactions::{is_guild_admin, private};
use super::types::{CommandOption, Interaction, User, option};
use super::{Dc, guild_scope, is_snowflake, user_key};
use crate::error::ChannelError;

/// Grants listed in one answer.
const LIST_MAX: usize = 40;

pub(super) async fn command(
    dc: &Dc,
    i: &Interaction,
    actor: &User,
    sub: Option<&CommandOption>,
) -> Result<(), ChannelError> {
    let Some(guild) = i.guild_id.as_deref().filter(|g| is_snowflake(g)) else {
        private(dc, i, "Use this command in a server.").await;
        return Ok(());
    };
    if !is_guild_admin(dc, i, actor) {
        private(
            dc,
            i,
            "Only the server owner or an Administrator can change permissions.",
        )
        .await;
        return Ok(());
    }
    let scope = guild_scope(guild);
    let Some(sub) = sub else { return Ok(()) };
    if sub.name == "list" {
        let grants = dc.runtime.list_grants(Some(&scope)).await?;
        let text = if grants.is_empty() {
            "No grants in this server.".to_owned()
        } else {
            let lines: Vec<String> = grants
                .iter()
                .take(LIST_MAX)
                .map(|g| format!("{}: {}", g.subject, g.capability))
                .collect();
            format!("Grants in this server:\n{}", lines.join("\n"))
        };
        private(dc, i, &text).await;
        return Ok(());
    }
    let capability = option(&sub.options, "capability").unwrap_or_default();
    // A configured MCP server's `mcp.<server>` is grantable too.
    let Ok(capability) = dc.runtime.grantable(capability.trim()) else {
        let mut known = known_capability_names();
        for extra in dc.runtime.extra_capabilities().into_keys() {
            known.push_str(", ");
            known.push_str(&extra);
        }
        private(dc, i, &format!("Unknown capability. Known: {known}")).await;
        return Ok(());
    };
    let subject = match (
        option(&sub.options, "role").filter(|r| is_snowflake(r)),
        option(&sub.options, "user").filter(|u| is_snowflake(u)),
    ) {
        (Some(role), None) => format!("role:{role}"),
        (None, Some(user)) => format!("user:{}", user_key(&user)),
        _ => {
            private(dc, i, "Give either a role or a user.").await;
            return Ok(());
        }
    };
    let event = |action: &str| AuditEvent {
        at: now_ms(),
        actor: user_key(&actor.id),
        action: action.to_owned(),
        target: subject.clone(),
        outcome: "ok".to_owned(),
        capability: Some(capability.clone()),
        scope: Some(scope.clone()),
    };
    let text = if sub.name == "grant" {
        let grant = Grant {
            subject: subject.clone(),
            capability: capability.clone(),
            scope: scope.clone(),
            granted_at: now_ms(),
            granted_by: user_key(&actor.id),
        };
        if dc.runtime.add_grant(grant, event("grant.add")).await? {
            format!("Granted {capability} to {subject} in this server.")
        } else {
            format!("{subject} already has {capability} in this server.")
        }
    } else if dc
        .runtime
        .remove_grant(&subject, &capability, &scope, event("grant.remove"))
        .await?
    {
        format!("Revoked {capability} from {subject} in this server.")
    } else {
        format!("{subject} had no grant of {capability} in this server.")
    };
    private(dc, i, &text).await;
    Ok(())
}
