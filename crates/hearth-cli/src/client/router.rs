//! `hearth feedback` and `hearth router`: rating answers, and what the
//! model router has learnt.

use hearth_server::routes::router::{Feedback, FeedbackResult, RatingBody, RouterView};

use super::{Api, enc};
use crate::Exit;
use crate::output::{print_json, table};

/// Rates a run's answer `up` or `down`.
pub(super) async fn feedback(
    api: &Api,
    run_id: &str,
    rating: &str,
    user: Option<String>,
    json_out: bool,
) -> Result<(), Exit> {
    let rating = match rating {
        "up" => RatingBody::Up,
        "down" => RatingBody::Down,
        other => {
            return Err(anyhow::anyhow!("rating {other:?}: use `up` or `down`").into());
        }
    };
    let body = Feedback {
        rating,
        user_key: user,
    };
    let done: FeedbackResult = api
        .post(&format!("/v1/runs/{}/feedback", enc(run_id)), &body)
        .await?;
    if json_out {
        print_json(&done);
    } else if done.counted {
        println!(
            "rated {}: the router counts it for the model that answered",
            done.run_id
        );
    } else {
        println!(
            "rated {}: the router learns nothing from it (its thread's model is set, or the \
             thread is incognito)",
            done.run_id
        );
    }
    Ok(())
}

/// Prints the router's strategy and its posteriors.
pub(super) async fn router(api: &Api, json_out: bool) -> Result<(), Exit> {
    let view: RouterView = api.get("/v1/router").await?;
    if json_out {
        print_json(&view);
        return Ok(());
    }
    println!("strategy: {}", view.strategy);
    if view.arms.is_empty() {
        println!("no arms");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = view
        .arms
        .iter()
        .map(|a| {
            vec![
                a.model.clone(),
                a.task.clone(),
                format!("{:.1}", a.alpha),
                format!("{:.1}", a.beta),
                format!("{:.2}", a.alpha / (a.alpha + a.beta)),
                a.runs.to_string(),
            ]
        })
        .collect();
    let headers = ["model", "task", "alpha", "beta", "mean", "runs"];
    println!(
        "{}",
        table(&headers, &[false, false, true, true, true, true], &rows)
    );
    Ok(())
}
