//! Benchmark of commands on another machine over SSH (a real sshd on loopback, "the other
//! machine" a separate spex world, see tests/it/support/sshd.rs): `spex deliver` to a real
//! hosted Claude there over a warm connection vs the same `deliver` run there (goal: local +
//! one round trip, the round trip measured as `ssh DEST true` over the same kind of warm
//! connection), and `spex sessions --all-hosts` with 3 remotes of 30 sessions each vs
//! `sessions --all-projects` of one. Needs `scripts/install-peers.sh` and
//! `scripts/install-test-tools.sh`. Run: `cargo bench --bench remote`.

#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::too_many_lines,
    reason = "benchmark rigging, not product code: a failed setup call panics on the spot, so fs_err's path adds little, and a scenario reads best as one function"
)]
#![allow(
    dead_code,
    reason = "the shared test support has more than this benchmark uses"
)]

#[path = "../tests/it/adapters/mod.rs"]
#[allow(
    unused_imports,
    reason = "clippy --all-targets builds the fakes' unit tests here without their harness"
)]
mod adapters;
#[path = "../tests/it/support"]
#[allow(
    unused_imports,
    reason = "clippy --all-targets builds the support's unit tests here without their harness"
)]
mod support {
    pub mod claude_home;
    pub mod fake_anthropic;
    pub mod http;
    pub mod peers;
    pub mod sshd;
    pub mod world;
}
#[path = "rig/live.rs"]
mod live;

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use live::{ms, percentile};
use serde_json::{Value, json};
use support::claude_home::{DUMMY_API_KEY, SeedOptions, seed_claude_home};
use support::fake_anthropic::FakeAnthropic;
use support::peers::peers_path;
use support::sshd::Sshd;
use support::world::{World, spex_bin, write};

const DELIVERIES: usize = 15;
const LISTINGS: usize = 20;
const SESSIONS_PER_HOST: usize = 30;

/// What the test key's logins also get: the fake API and the pinned harnesses on `PATH`.
fn login_env(sshd: &Sshd, extra: &[(&str, OsString)]) {
    let file = sshd.dir.path().join("authorized_keys");
    let line = std::fs::read_to_string(&file).unwrap();
    let more: String = extra
        .iter()
        .map(|(k, v)| format!("environment=\"{k}={}\",", v.to_string_lossy()))
        .collect::<Vec<_>>()
        .concat();
    write(&file, format!("{more}{line}"));
}

fn fake_env(fake: &FakeAnthropic, w: &World) -> Vec<(&'static str, OsString)> {
    let mut path = OsString::from(spex_bin().parent().unwrap());
    path.push(":");
    path.push(peers_path());
    vec![
        ("ANTHROPIC_BASE_URL", fake.base_url().into()),
        ("ANTHROPIC_API_KEY", DUMMY_API_KEY.into()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        ("TERM", "xterm-256color".into()),
        ("PATH", path),
        ("XDG_RUNTIME_DIR", w.dir.path().join("run").into()),
    ]
}

/// `spex args` in `w`'s world with `env`, from `cwd`.
fn spex(w: &World, cwd: &Path, env: &[(&str, OsString)], args: &[&str]) -> Output {
    let mut c = w.cmd(cwd, args);
    c.envs(env.iter().map(|(k, v)| (*k, v)));
    c.output().unwrap()
}

fn ok_json(out: &Output, what: &str) -> Value {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn wait_idle(w: &World, env: &[(&str, OsString)], id: &str) {
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let s = ok_json(&spex(w, &w.repo, env, &["show", id, "--json"]), "show");
        if s["session"]["status"] == "idle" && s["session"]["turn"]["state"] == "completed" {
            return;
        }
        assert!(Instant::now() < deadline, "the turn never completed: {s}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn report(what: &str, took: &mut [Duration]) -> Duration {
    took.sort();
    println!(
        "{what}, {} runs: p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms",
        took.len(),
        ms(percentile(took, 500)),
        ms(percentile(took, 900)),
        ms(took[took.len() - 1])
    );
    percentile(took, 500)
}

/// `ssh DEST true` over a warm multiplexed connection of its own: one round trip.
fn round_trip(sshd: &Sshd) -> Vec<Duration> {
    let control = sshd.dir.path().join("bench-mux");
    let run = || {
        let began = Instant::now();
        let st = Command::new("ssh")
            .arg("-F")
            .arg(&sshd.client_config)
            .args(["-o", "BatchMode=yes", "-o", "ControlMaster=auto"])
            .args(["-o", "ControlPersist=60"])
            .arg("-o")
            .arg(format!("ControlPath={}", control.display()))
            .args([Sshd::ALIAS, "true"])
            .status()
            .unwrap();
        assert!(st.success());
        began.elapsed()
    };
    run();
    (0..DELIVERIES).map(|_| run()).collect()
}

fn deliver(other: &World, fake: &FakeAnthropic, sshd: &Sshd, local: &World) {
    let there = fake_env(fake, other);
    let here = [(
        "SPEX_SSH_CONFIG",
        sshd.client_config.clone().into_os_string(),
    )];
    let launched = ok_json(
        &spex(
            other,
            &other.repo,
            &there,
            &["launch", "--harness", "claude", "--detach", "--json"],
        ),
        "launch",
    );
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let dev = format!("dev:{id}");
    // Warm: the connection is up before the first timed call.
    ok_json(
        &spex(local, &local.repo, &here, &["show", &dev, "--json"]),
        "show",
    );
    let mut local_took = Vec::new();
    let mut remote_took = Vec::new();
    for i in 0..DELIVERIES {
        let began = Instant::now();
        let d = ok_json(
            &spex(
                other,
                &other.repo,
                &there,
                &["deliver", &id, &format!("USE_NONE local {i}"), "--json"],
            ),
            "deliver there",
        );
        local_took.push(began.elapsed());
        assert_eq!(d["confirmed"], true, "{d}");
        wait_idle(other, &there, &id);
        let began = Instant::now();
        let d = ok_json(
            &spex(
                local,
                &local.repo,
                &here,
                &["deliver", &dev, &format!("USE_NONE remote {i}"), "--json"],
            ),
            "deliver from here",
        );
        remote_took.push(began.elapsed());
        assert_eq!(d["confirmed"], true, "{d}");
        wait_idle(other, &there, &id);
    }
    show_lines(other, &there, sshd, local, &id);
    let local = report("deliver run on the machine itself", &mut local_took);
    let remote = report(
        "deliver dev:ID over a warm SSH connection",
        &mut remote_took,
    );
    let rt = report(
        "one round trip (`ssh DEST true`, warm)",
        &mut round_trip(sshd),
    );
    println!(
        "remote deliver = local + {:.1} ms (one round trip: {:.1} ms; the rest: starting ssh here and one spex there)",
        (remote.saturating_sub(local)).as_secs_f64() * 1000.0,
        rt.as_secs_f64() * 1000.0
    );
    spex(other, &other.repo, &there, &["stop", &id, "--json"]);
}

/// What the remote line costs, interleaved under the same load: `show ID --json` run there,
/// and over one warm connection of the bench's own (so only the line differs) the line a
/// command on `host:handle` sends now (one spex: `rpc --protocol 1 --require exec ... -- show`)
/// and the line it sent before (a `hello` piped to `spex rpc`, a `grep`, then `exec spex show`),
/// and `ssh DEST true`.
fn show_lines(other: &World, there: &[(&str, OsString)], sshd: &Sshd, local_w: &World, id: &str) {
    let control = sshd.dir.path().join("bench-mux2");
    let ssh = |line: &str| {
        let began = Instant::now();
        let out = Command::new("ssh")
            .arg("-F")
            .arg(&sshd.client_config)
            .args(["-o", "BatchMode=yes", "-o", "ControlMaster=auto"])
            .args(["-o", "ControlPersist=60"])
            .arg("-o")
            .arg(format!("ControlPath={}", control.display()))
            .args([Sshd::ALIAS, line])
            .output()
            .unwrap();
        assert!(out.status.success(), "{line}: {out:?}");
        began.elapsed()
    };
    let now = format!(
        "exec spex rpc --protocol 1 --require exec --as dev --stderr-fd 3 -- show {id} --json 3>&2 2>/dev/null"
    );
    let before = format!(
        "printf '%s' '{{\"protocol\":1,\"method\":\"hello\"}}' | spex rpc 2>/dev/null | grep -q '\"commands\"' || exit 97; exec spex show {id} --json"
    );
    ssh("true");
    let here = [(
        "SPEX_SSH_CONFIG",
        sshd.client_config.clone().into_os_string(),
    )];
    let dev = format!("dev:{id}");
    let (mut local, mut one, mut two, mut rt) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut full = Vec::new();
    for _ in 0..LISTINGS {
        let began = Instant::now();
        ok_json(
            &spex(other, &other.repo, there, &["show", id, "--json"]),
            "show",
        );
        local.push(began.elapsed());
        let began = Instant::now();
        ok_json(
            &spex(local_w, &local_w.repo, &here, &["show", &dev, "--json"]),
            "show from here",
        );
        full.push(began.elapsed());
        one.push(ssh(&now));
        two.push(ssh(&before));
        rt.push(ssh("true"));
    }
    let local = report("show ID --json run there", &mut local);
    let full = report(
        "show dev:ID --json from here (spex here, ssh, one spex there)",
        &mut full,
    );
    let one = report("the line now: one spex there (show)", &mut one);
    let two = report("the line before: hello | grep, then spex (show)", &mut two);
    let rt = report("ssh DEST true", &mut rt);
    println!(
        "remote show = local + {:.1} ms from here; the line alone: + {:.1} ms now, + {:.1} ms before (one round trip: {:.1} ms)",
        full.saturating_sub(local).as_secs_f64() * 1000.0,
        one.saturating_sub(local).as_secs_f64() * 1000.0,
        two.saturating_sub(local).as_secs_f64() * 1000.0,
        rt.as_secs_f64() * 1000.0
    );
}

/// A world whose store holds `n` sessions that ran a turn (hand-written hook payloads).
fn sessions_world(n: usize) -> World {
    let w = World::new();
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"] }\n",
    );
    w.ok(&w.repo, &["materialize"]);
    for i in 0..n {
        let payload = |event: &str| {
            json!({"session_id": format!("00000000-0000-4000-8000-{i:012}"), "cwd": w.repo,
                "hook_event_name": event, "prompt": "hi"})
        };
        w.dispatch(
            &w.repo,
            "claude",
            "UserPromptSubmit",
            &payload("UserPromptSubmit"),
        );
        w.dispatch(&w.repo, "claude", "Stop", &payload("Stop"));
    }
    w.skip_grammar();
    w
}

fn all_hosts() {
    let local = &World::new();
    let hosts: Vec<(World, Sshd)> = (0..3)
        .map(|_| {
            let w = sessions_world(SESSIONS_PER_HOST);
            let s = Sshd::start(&w);
            (w, s)
        })
        .collect();
    // One client config naming the three machines.
    let config = local.dir.path().join("ssh_config3");
    let mut text = String::new();
    let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    for (i, (_, s)) in hosts.iter().enumerate() {
        let d = s.dir.path().display();
        text.push_str(&format!(
            "Host h{i}\n  HostName 127.0.0.1\n  Port {}\n  User {}\n  IdentityFile {d}/client_key\n  IdentitiesOnly yes\n  UserKnownHostsFile {d}/known_hosts\n  StrictHostKeyChecking accept-new\n  LogLevel ERROR\n",
            s.port,
            user.trim()
        ));
    }
    write(&config, text);
    let here = [("SPEX_SSH_CONFIG", config.into_os_string())];
    for i in 0..3 {
        let (n, d) = (format!("h{i}"), format!("h{i}"));
        ok_json(
            &spex(local, &local.repo, &here, &["remote", "add", &n, &d]),
            "remote add",
        );
    }
    let list = ok_json(
        &spex(
            local,
            &local.repo,
            &here,
            &["sessions", "--all-hosts", "--json"],
        ),
        "warm",
    );
    let want = SESSIONS_PER_HOST * 3 + local.session_ids().len();
    assert_eq!(list.as_array().map(Vec::len), Some(want), "{list}");
    let mut took: Vec<Duration> = (0..LISTINGS)
        .map(|_| {
            let began = Instant::now();
            ok_json(
                &spex(
                    local,
                    &local.repo,
                    &here,
                    &["sessions", "--all-hosts", "--json"],
                ),
                "all hosts",
            );
            began.elapsed()
        })
        .collect();
    report(
        &format!(
            "sessions --all-hosts --json, 3 remotes x {SESSIONS_PER_HOST} sessions + this machine's"
        ),
        &mut took,
    );
    let (w0, _) = &hosts[0];
    let mut took: Vec<Duration> = (0..LISTINGS)
        .map(|_| {
            let began = Instant::now();
            ok_json(
                &spex(w0, &w0.home, &[], &["sessions", "--all-projects", "--json"]),
                "one host",
            );
            began.elapsed()
        })
        .collect();
    report(
        &format!("sessions --all-projects --json on one machine of {SESSIONS_PER_HOST} sessions"),
        &mut took,
    );
}

fn main() {
    let other = World::new();
    std::fs::create_dir_all(other.dir.path().join("run")).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            other.dir.path().join("run"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
    }
    write(
        &other.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"] }\n",
    );
    seed_claude_home(
        &other.home,
        DUMMY_API_KEY,
        &[&other.repo],
        SeedOptions::default(),
    );
    other.ok(&other.repo, &["materialize"]);
    other.skip_grammar();
    let fake = FakeAnthropic::start();
    let sshd = Sshd::start(&other);
    login_env(&sshd, &fake_env(&fake, &other));
    let local = World::new();
    let here = [(
        "SPEX_SSH_CONFIG",
        sshd.client_config.clone().into_os_string(),
    )];
    ok_json(
        &spex(
            &local,
            &local.repo,
            &here,
            &["remote", "add", "dev", Sshd::ALIAS],
        ),
        "remote add",
    );
    deliver(&other, &fake, &sshd, &local);
    all_hosts();
}
