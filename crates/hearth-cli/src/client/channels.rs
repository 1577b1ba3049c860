//! `hearth channels`, `hearth pair ...` and `hearth outbox ...`: the chat
//! channels' state, pairing approvals and the outbox, over the HTTP API.

use hearth_server::routes::channels::{
    Approved, ChannelList, Denied, OutboxDto, OutboxList, PairingList,
};

use super::{Api, enc};
use crate::Exit;
use crate::cli::{OutboxCommand, PairCommand};
use crate::output::{print_json, shown};

/// `hearth channels`: one line per channel.
pub(super) async fn channels(api: &Api, json_out: bool) -> Result<(), Exit> {
    let list: ChannelList = api.get("/v1/channels").await?;
    if json_out {
        print_json(&list);
        return Ok(());
    }
    for c in &list.channels {
        let mut line = format!("{:<9} {:<10} pending {}", c.name, c.state, c.outbox_pending);
        if let Some(e) = &c.last_error {
            line.push_str(&format!("  last error: {}", shown(e)));
        }
        println!("{line}");
    }
    Ok(())
}

/// `hearth pair list|approve|deny`.
pub(super) async fn pair(api: &Api, command: PairCommand, json_out: bool) -> Result<(), Exit> {
    match command {
        PairCommand::List => {
            let list: PairingList = api.get("/v1/pairings").await?;
            if json_out {
                print_json(&list);
            } else if list.pairings.is_empty() {
                println!("no pending pairing requests");
            } else {
                for p in &list.pairings {
                    println!(
                        "{}  {:<9} {}  {}  expires {}",
                        p.code,
                        p.channel,
                        p.user_key,
                        shown(&p.display_name),
                        p.expires_at
                    );
                }
            }
        }
        PairCommand::Approve { code } => {
            let ok: Approved = api
                .post(
                    &format!("/v1/pairings/{}/approve", enc(&code)),
                    &serde_json::json!({}),
                )
                .await?;
            if json_out {
                print_json(&ok);
            } else {
                println!(
                    "approved {} on {}; they have been told",
                    ok.user_key, ok.channel
                );
            }
        }
        PairCommand::Deny { code } => {
            let ok: Denied = api
                .post(
                    &format!("/v1/pairings/{}/deny", enc(&code)),
                    &serde_json::json!({}),
                )
                .await?;
            if json_out {
                print_json(&ok);
            } else {
                println!("denied {} on {}", ok.user_key, ok.channel);
            }
        }
    }
    Ok(())
}

/// `hearth outbox list|retry`.
pub(super) async fn outbox(api: &Api, command: OutboxCommand, json_out: bool) -> Result<(), Exit> {
    match command {
        OutboxCommand::List { status, limit } => {
            let mut path = format!("/v1/outbox?limit={limit}");
            if let Some(s) = status {
                path.push_str(&format!("&status={}", enc(&s)));
            }
            let list: OutboxList = api.get(&path).await?;
            if json_out {
                print_json(&list);
            } else if list.items.is_empty() {
                println!("the outbox is empty");
            } else {
                for i in &list.items {
                    let mut line = format!(
                        "{:>6}  {:<8} {:<9} {:<7} {}  attempts {}",
                        i.id, i.status, i.channel, i.kind, i.target, i.attempts
                    );
                    if let Some(e) = &i.last_error {
                        line.push_str(&format!("  {e}"));
                    }
                    println!("{line}");
                }
            }
        }
        OutboxCommand::Retry { id } => {
            let item: OutboxDto = api
                .post(&format!("/v1/outbox/{id}/retry"), &serde_json::json!({}))
                .await?;
            if json_out {
                print_json(&item);
            } else {
                println!("outbox item {} is queued again", item.id);
            }
        }
    }
    Ok(())
}
