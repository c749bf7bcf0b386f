//! The browser driver of the rig (`support/browser.rs`) against a tiny page served here by a
//! std `TcpListener`: real headless Chromium opens it at a phone's and a desktop's size, reads,
//! clicks, types, evaluates, waits, screenshots, and measures sideways scrolling. Fails, never
//! skips: without `chromium` on PATH it says to run `scripts/install-test-tools.sh`.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use crate::support::browser::{Browser, DESKTOP, PHONE};

const PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>driver smoke</title>
<style>body { margin: 0; font: 16px sans-serif } #wide { width: 2000px; height: 10px }</style>
</head><body>
<h1 id="title">Hello, driver</h1>
<p id="size"></p>
<input id="name" autocomplete="off">
<button id="go">Go</button>
<p id="out"></p>
<p id="late"></p>
<script src="/app.js"></script>
</body></html>
"#;

const SCRIPT: &str = r"
document.getElementById('size').textContent = innerWidth + 'x' + innerHeight;
document.getElementById('go').addEventListener('click', () => {
  document.getElementById('out').textContent = 'hi ' + document.getElementById('name').value;
});
setTimeout(() => { document.getElementById('late').textContent = 'arrived'; }, 300);
if (location.search.includes('wide')) {
  const d = document.createElement('div'); d.id = 'wide'; document.body.appendChild(d);
}
";

/// Serves [`PAGE`] at every path but `/app.js` ([`SCRIPT`]) until the test ends; its base URL.
fn serve() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            // The headers, up to the blank line; a GET has no body.
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let path = request_line.split(' ').nth(1).unwrap_or("/");
            let (kind, body) = if path.starts_with("/app.js") {
                ("text/javascript", SCRIPT)
            } else {
                ("text/html; charset=utf-8", PAGE)
            };
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}")
}

#[test]
fn the_driver_reads_clicks_types_waits_and_screenshots_a_real_page() {
    let base = serve();
    let started = Instant::now();
    let browser = Browser::start();
    let page = browser.open(&format!("{base}/"), PHONE);
    eprintln!("chromium up and the page loaded in {:?}", started.elapsed());

    assert_eq!(page.text("#title"), "Hello, driver");
    assert_eq!(
        page.text("#size"),
        "390x844",
        "the phone's viewport applies"
    );
    assert_eq!(page.text_of("#missing"), None);
    assert_eq!(page.count("p"), 3);
    assert_eq!(page.eval("1 + 2"), 3);
    assert_eq!(
        page.eval("Promise.resolve({a: [1]})"),
        serde_json::json!({"a": [1]})
    );
    assert!(page.try_eval("nope()").unwrap_err().contains("nope"));

    // A change timed in the page: noted when the DOM changed, on the machine's clock.
    page.goto(&format!("{base}/"));
    page.mark_when(
        "late",
        "document.getElementById('late').textContent === 'arrived'",
    );
    let loaded = std::time::SystemTime::now();
    let at = page.wait_mark("late", Duration::from_secs(5));
    let after = at.duration_since(loaded).unwrap_or_default();
    assert!(after < Duration::from_millis(400), "{after:?}");
    page.mark_when("at once", "true");
    assert!(page.mark("at once").is_some());
    assert!(page.mark("never set").is_none());

    page.type_into("#name", "<b>world</b>");
    page.click("#go");
    page.wait_text("#out", "hi", Duration::from_secs(5));
    assert_eq!(page.text("#out"), "hi <b>world</b>");
    page.wait_text("#late", "arrived", Duration::from_secs(5));

    assert_eq!(page.horizontal_overflow(), 0);
    let png = page.screenshot_png();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    assert!(page.errors().is_empty(), "{:?}", page.errors());

    // A page wider than the screen is measured as such, at a desktop's size too.
    let wide = browser.open(&format!("{base}/?wide"), DESKTOP);
    assert_eq!(wide.text("#size"), "1280x800");
    assert_eq!(wide.horizontal_overflow(), 2000 - 1280);

    // A wait that never comes true says what it waited for and what the page showed.
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        page.wait_text("#late", "never", Duration::from_millis(200));
    }))
    .unwrap_err();
    let said = failed.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        said.contains("\"never\"") && said.contains("Hello, driver"),
        "{said}"
    );
}
