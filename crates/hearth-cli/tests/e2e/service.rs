//! `hearth service` and the systemd notifications of `hearth serve`.

use std::path::Path;
use std::time::Duration;

use crate::harness::{Hearth, bin, command};

/// A folder holding a fake `systemctl` that logs its arguments to
/// `<dir>/systemctl.log`, one call a line.
fn fake_systemctl(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin_dir = dir.join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let script = bin_dir.join("systemctl");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\n",
            dir.join("systemctl.log").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin_dir
}

/// `hearth service <args>` with HOME at `user_home` and only `path` on PATH.
async fn service(
    home: &Path,
    user_home: &Path,
    path: &Path,
    args: &[&str],
) -> std::process::Output {
    command(home)
        .env("HOME", user_home)
        .env("PATH", path)
        .arg("service")
        .args(args)
        .output()
        .await
        .unwrap()
}

#[tokio::test]
async fn install_print_prints_the_unit_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let user_home = dir.path().join("user");
    std::fs::create_dir_all(&user_home).unwrap();
    let home = dir.path().join("hearth-home");
    let path = fake_systemctl(dir.path());
    let out = service(&home, &user_home, &path, &["install", "--user", "--print"]).await;
    assert!(out.status.success(), "{out:?}");
    let unit = String::from_utf8(out.stdout).unwrap();
    assert!(
        unit.contains(&format!(
            "\nExecStart={} serve --home {}\n",
            bin(),
            home.display()
        )),
        "{unit}"
    );
    assert!(unit.contains("\nType=notify\n"), "{unit}");
    // Nothing written, nothing run, not even the home.
    assert!(!user_home.join(".config").exists());
    assert!(!home.exists());
    assert!(!dir.path().join("systemctl.log").exists());
}

#[tokio::test]
async fn install_writes_the_user_unit_enables_it_and_uninstall_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let user_home = dir.path().join("user");
    let home = dir.path().join("hearth-home");
    std::fs::create_dir_all(&user_home).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let path = fake_systemctl(dir.path());
    let printed = service(&home, &user_home, &path, &["install", "--print"]).await;
    let out = service(&home, &user_home, &path, &["install", "--user"]).await;
    assert!(out.status.success(), "{out:?}");
    let unit_path = user_home.join(".config/systemd/user/hearth.service");
    let written = std::fs::read(&unit_path).unwrap();
    assert_eq!(written, printed.stdout, "--print shows what install writes");
    let log = std::fs::read_to_string(dir.path().join("systemctl.log")).unwrap();
    assert_eq!(log, "--user daemon-reload\n--user enable hearth.service\n");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("hearth.env"), "{stdout}");

    let out = service(&home, &user_home, &path, &["uninstall", "--user"]).await;
    assert!(out.status.success(), "{out:?}");
    assert!(!unit_path.exists());
    let log = std::fs::read_to_string(dir.path().join("systemctl.log")).unwrap();
    assert!(
        log.ends_with("--user disable --now hearth.service\n--user daemon-reload\n"),
        "{log}"
    );
}

#[tokio::test]
async fn install_refuses_a_missing_home_and_says_how_to_create_it() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("nowhere");
    let path = fake_systemctl(dir.path());
    let out = service(&home, dir.path(), &path, &["install"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("does not exist: create it first"),
        "{stderr}"
    );
    assert!(!dir.path().join(".config").exists());
}

#[tokio::test]
async fn the_unit_passes_systemd_analyze_verify() {
    let Some(analyze) = which("systemd-analyze") else {
        eprintln!("skipped: systemd-analyze is not installed (package systemd)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hearth home");
    std::fs::create_dir_all(&home).unwrap();
    let printed =
        crate::harness::succeeds(command(&home).args(["service", "install", "--print"])).await;
    let unit = dir.path().join("hearth.service");
    std::fs::write(&unit, printed).unwrap();
    let check = std::process::Command::new(analyze)
        .arg("verify")
        .arg(&unit)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "systemd-analyze verify: {stderr}");
    // It exits 0 on some warnings too: none may be about this unit.
    assert!(!stderr.contains("hearth.service"), "{stderr}");
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The next datagram on `socket`, within 30 s.
async fn next(socket: &tokio::net::UnixDatagram) -> String {
    let mut buf = vec![0u8; 4096];
    let len = tokio::time::timeout(Duration::from_secs(30), socket.recv(&mut buf))
        .await
        .expect("no notification within 30 s")
        .unwrap();
    String::from_utf8(buf[..len].to_vec()).unwrap()
}

#[tokio::test]
async fn serve_tells_systemd_it_is_ready_once_readyz_answers_and_pings_the_watchdog() {
    let dir = tempfile::tempdir().unwrap();
    let socket_path = dir.path().join("notify");
    let socket = tokio::net::UnixDatagram::bind(&socket_path).unwrap();
    let home = dir.path().join("home");
    let hearth = Hearth::start_with(
        &home,
        None,
        &[
            ("NOTIFY_SOCKET", socket_path.to_str().unwrap()),
            ("WATCHDOG_USEC", "200000"),
        ],
    )
    .await;
    let first = next(&socket).await;
    assert!(first.lines().any(|l| l == "READY=1"), "{first:?}");
    // Ready as /readyz says: it answers 200 from this moment.
    let (status, body) = hearth.get("/readyz").await;
    assert_eq!(status, 200, "{body}");
    // Then the watchdog, at half of WATCHDOG_USEC.
    for _ in 0..2 {
        assert_eq!(next(&socket).await, "WATCHDOG=1");
    }
    hearth.kill().await;
}

#[tokio::test]
async fn serve_sends_ready_to_an_abstract_notify_socket() {
    use std::os::linux::net::SocketAddrExt;
    let dir = tempfile::tempdir().unwrap();
    let name = format!("hearth-e2e-notify-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let std_socket = std::os::unix::net::UnixDatagram::bind_addr(&addr).unwrap();
    std_socket.set_nonblocking(true).unwrap();
    let socket = tokio::net::UnixDatagram::from_std(std_socket).unwrap();
    let value = format!("@{name}");
    let hearth = Hearth::start_with(dir.path(), None, &[("NOTIFY_SOCKET", &value)]).await;
    let first = next(&socket).await;
    assert!(first.lines().any(|l| l == "READY=1"), "{first:?}");
    // No WATCHDOG_USEC, no pings.
    let mut buf = [0u8; 64];
    let more = tokio::time::timeout(Duration::from_millis(500), socket.recv(&mut buf)).await;
    assert!(more.is_err(), "a notification besides READY=1: {more:?}");
    hearth.kill().await;
}
