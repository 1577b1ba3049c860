//! One server per home.

use crate::harness::{Hearth, command};

#[tokio::test]
async fn a_second_server_on_the_same_home_is_refused_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let first = Hearth::start(dir.path(), None).await;
    let second = command(dir.path())
        .args(["serve", "--bind", "127.0.0.1:0"])
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(30), second)
        .await
        .expect("the second server started and kept running")
        .unwrap();
    assert!(!out.status.success(), "the second server started");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let pid = first.pid();
    assert!(
        stderr.contains(&format!(
            "another hearth serve (PID {pid}) is using the home"
        )),
        "{stderr}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).is_empty(),
        "the second server printed that it listens"
    );
    // The first one still serves.
    let (status, _) = first.get("/healthz").await;
    assert_eq!(status, 200);
    first.kill().await;
    // Its lock died with it: a new server starts on the home.
    let again = Hearth::start(dir.path(), None).await;
    again.kill().await;
}
