//! Not sent while a person looks (issue 31): `spex board` in a real headless Chromium with a
//! REAL Claude Code session (offline against the fake model server) and `spex notify --watch`
//! beside it. While the page shows the session's card with the page visible (the Page
//! Visibility API), the board keeps the notifier's viewing marker and the session's
//! permission is not announced; once the page is hidden (another tab in front) or closed, the
//! marker goes and the next permission is. The notification's view link opens the board at
//! that session; a card scrolled out of view is not shown. Needs `scripts/install-peers.sh` and `scripts/install-test-tools.sh`; fails,
//! never skips.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::board_browser::{Board, card, open_board};
use crate::notify::{Hosts, answer, configure, permission, receiver};
use crate::runtime::{claude_world, spex_cmd};
use crate::support::browser::{Browser, DESKTOP, PHONE, js_string};
use crate::support::claude_home::SeedOptions;
use crate::support::world::{pretty, read_or_empty, wait_status};

/// Waits until `done` holds, for at most `within`.
fn within(what: &str, within: Duration, done: impl Fn() -> bool) {
    let end = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < end, "{what} not within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether the marker at `path` is younger than the notifier's 30 s.
fn fresh(path: &Path) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age < Duration::from_secs(30))
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one page's life: shown, hidden, shown, closed, opened by the view link"
)]
fn a_session_shown_on_a_visible_board_page_is_not_announced_and_is_once_the_page_is_hidden() {
    let (w, fake) = claude_world(SeedOptions::default());
    let hosts = Hosts::new(&w, &fake);
    let hook = receiver(200, None);
    // The board's own process sends (the channel is configured before it starts), with its
    // address, picked beforehand, as the links' public URL.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let origin = format!("http://127.0.0.1:{port}");
    configure(
        &w,
        &json!({"on": ["needs_attention"], "dwell": "0s", "publicUrl": origin,
                "webhook": {"url": format!("http://{}/hook", hook.addr())}}),
    );
    w.ok(&w.repo, &["materialize"]);
    let b = Board::start(spex_cmd(
        &w,
        &fake,
        &["board", "--listen", &format!("127.0.0.1:{port}"), "--json"],
    ));
    let lock = w.spex_home.join("notify/sender.lock");
    within("the board's sender", Duration::from_secs(20), || {
        read_or_empty(&lock).trim() == b.child.id().to_string()
    });
    let id = hosts.launch();
    let marker = w.spex_home.join("notify/viewing").join(&id);

    // The page shows the session's card, the page visible: the board keeps its marker.
    let browser = Browser::start();
    let page = open_board(&browser, &b, DESKTOP);
    let c = card(&id);
    page.wait_for(
        "the session's card",
        &format!("!!document.querySelector({})", js_string(&c)),
        Duration::from_secs(10),
    );
    assert_eq!(page.eval("document.visibilityState"), "visible");
    within("the viewing marker", Duration::from_secs(5), || {
        fresh(&marker)
    });
    let viewing = page.eval("document.body.dataset.viewing");
    assert!(
        viewing.as_str().unwrap().contains(&id),
        "{viewing} {}",
        page.body_text()
    );

    // Its permission: nothing is sent while the page shows it.
    let first = permission(&w, &fake, &id, "USE_BASH run it");
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        hook.requests().is_empty(),
        "announced while shown: {}",
        pretty(&json!(hook.requests()))
    );
    answer(&w, &fake, &id, first["id"].as_str().unwrap());
    wait_status(&w, &id, "idle", Duration::from_mins(1));

    // Another tab in front: the board page is hidden, it says it shows nothing, the marker
    // goes, and the next permission is announced.
    let other = browser.open("about:blank", DESKTOP);
    other.to_front();
    page.wait_for(
        "the board page hidden",
        "document.visibilityState === 'hidden'",
        Duration::from_secs(10),
    );
    within("the marker to go", Duration::from_secs(5), || {
        !marker.exists()
    });
    let second = permission(&w, &fake, &id, "USE_BASH run it again");
    let got = hook
        .request_within(
            |r| r["body"]["attention"] == second["id"],
            Duration::from_secs(10),
        )
        .expect("not announced while hidden");
    assert_eq!(got["body"]["session"], id.as_str(), "{}", pretty(&got));
    let view = got["body"]["view"].as_str().unwrap().to_owned();
    assert!(
        view.starts_with(&format!("{origin}/#session=")) && view.ends_with(&id),
        "{}",
        pretty(&got)
    );
    answer(&w, &fake, &id, second["id"].as_str().unwrap());
    wait_status(&w, &id, "idle", Duration::from_mins(1));

    // In front again: the marker is back; the tab closed: it goes.
    page.to_front();
    page.wait_for(
        "the board page visible",
        "document.visibilityState === 'visible'",
        Duration::from_secs(10),
    );
    within("the marker back", Duration::from_secs(5), || fresh(&marker));
    page.close();
    within(
        "the marker to go with the tab",
        Duration::from_secs(5),
        || !marker.exists(),
    );

    // The notification's view link opens the board at the session (a phone that opened the
    // board once holds its cookie), and the session shown there is marked again.
    let login = open_board(&browser, &b, PHONE);
    login.close();
    let phone = browser.open(&view, PHONE);
    phone.wait_for(
        "the linked session's card focused and in view",
        &format!(
            "(c => c && c.classList.contains('focused') && c.getBoundingClientRect().top < innerHeight && c.getBoundingClientRect().bottom > 0)(document.querySelector({}))",
            js_string(&c)
        ),
        Duration::from_secs(10),
    );
    within("the marker from the phone", Duration::from_secs(5), || {
        fresh(&marker)
    });
    // Scrolled away (a long board: more below it), the card is not shown: the marker goes.
    phone.eval(
        "(() => { const d = document.createElement('div'); d.style.height = '4000px'; document.body.append(d); })()",
    );
    phone.eval(&format!(
        "scrollTo(0, document.querySelector({}).getBoundingClientRect().bottom + scrollY + 10)",
        js_string(&c)
    ));
    phone.wait_for(
        "the page to show no session",
        "document.body.dataset.viewing === '[]'",
        Duration::from_secs(10),
    );
    within(
        "the marker to go when scrolled away",
        Duration::from_secs(5),
        || !marker.exists(),
    );
    assert_eq!(hook.requests().len(), 1, "{:?}", hook.requests());
    assert!(phone.errors().is_empty(), "{:?}", phone.errors());
}
