//! A real headless Chromium for the board's browser tests: Debian's `chromium` (installed by
//! `scripts/install-test-tools.sh`), driven over the Chrome `DevTools` protocol by `headless_chrome`.
//! Each [`Browser`] is its own process with a fresh profile, no network of its own beyond what a
//! page asks for, and no sandbox (the tests run as root in CI). A [`Page`] is one tab at a fixed
//! viewport; its reads, clicks and typing go through the DOM as a person's would, and its waits
//! fail with what they waited for, how long and the page's text at that moment.
//!
//! A protocol call costs up to ~100 ms here (`headless_chrome` reads its socket with a 100 ms
//! timeout under the lock a call needs to send), so anything timed is timed inside the page
//! ([`Page::mark_when`]) against the machine's clock, not by polling from the test.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use headless_chrome::protocol::cdp::{Emulation, Page as Cdp, Runtime};
use headless_chrome::{LaunchOptions, Tab};
use serde_json::Value;

/// A phone's viewport (CSS pixels), as the issue names it.
pub const PHONE: Viewport = Viewport {
    width: 390,
    height: 844,
    mobile: true,
};

/// A desktop browser window.
pub const DESKTOP: Viewport = Viewport {
    width: 1280,
    height: 800,
    mobile: false,
};

/// How long a [`Page`] call without its own timeout may take (a protocol round trip, a click).
const CALL_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Clone, Copy, Debug)]
pub struct Viewport {
    pub width: u32,
    pub height: u32,
    /// Emulates a phone: the page's `<meta name="viewport">` applies, touch events exist.
    pub mobile: bool,
}

/// A running headless Chromium; it ends (and its profile is removed) when dropped.
pub struct Browser {
    browser: headless_chrome::Browser,
    _profile: tempfile::TempDir,
}

/// The `chromium` on `PATH`; panics saying how to install it when there is none.
pub fn chromium_path() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("chromium"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("no `chromium` on PATH: run scripts/install-test-tools.sh (Debian's chromium)")
        })
}

impl Browser {
    /// Starts Chromium headless with a fresh profile.
    pub fn start() -> Browser {
        let profile = tempfile::Builder::new()
            .prefix("spx-chromium")
            .tempdir_in("/tmp")
            .unwrap();
        // Nothing but the pages the test opens: no updates, no sync, no QUIC probes, no
        // first-run screens. headless_chrome adds --headless, --no-sandbox and --disable-gpu
        // from the options below.
        let args: Vec<&std::ffi::OsStr> = [
            "--disable-quic",
            "--disable-component-update",
            "--disable-domain-reliability",
            "--no-default-browser-check",
            "--hide-scrollbars",
            "--mute-audio",
        ]
        .iter()
        .map(std::ffi::OsStr::new)
        .collect();
        let options = LaunchOptions {
            headless: true,
            sandbox: false,
            enable_gpu: false,
            path: Some(chromium_path()),
            user_data_dir: Some(profile.path().to_path_buf()),
            window_size: Some((DESKTOP.width, DESKTOP.height)),
            args,
            // The transport closes after this long without an event from the browser; a test
            // may sit up to a minute waiting for a harness; a call the browser never answers fails
            // after this long too.
            idle_browser_timeout: Duration::from_mins(2),
            ..LaunchOptions::default()
        };
        let browser = headless_chrome::Browser::new(options)
            .unwrap_or_else(|e| panic!("starting {}: {e:#}", chromium_path().display()));
        Browser {
            browser,
            _profile: profile,
        }
    }

    /// The browser's process id.
    pub fn pid(&self) -> u32 {
        self.browser.get_process_id().expect("a launched browser")
    }

    /// A new tab at `viewport`, showing `url` once its load event fired.
    pub fn open(&self, url: &str, viewport: Viewport) -> Page {
        self.open_with(url, viewport, "")
    }

    /// [`Browser::open`], with the script `init` run in every document the tab loads before
    /// any of the document's own scripts (to time a page from its start).
    pub fn open_with(&self, url: &str, viewport: Viewport, init: &str) -> Page {
        let tab = self.browser.new_tab().expect("a new tab");
        tab.set_default_timeout(CALL_TIMEOUT);
        let page = Page { tab };
        page.set_viewport(viewport);
        // Errors the page throws (and CSP violations) are kept for `errors()`.
        page.tab
            .call_method(Cdp::AddScriptToEvaluateOnNewDocument {
                source: format!("{ERROR_TRAP}\n{init}"),
                world_name: None,
                include_command_line_api: None,
                run_immediately: None,
            })
            .expect("Page.addScriptToEvaluateOnNewDocument");
        page.goto(url);
        page
    }

    /// The browser's product and version (`Chrome/…`).
    pub fn version(&self) -> String {
        self.browser
            .get_version()
            .map_or_else(|e| format!("unknown: {e}"), |v| v.product)
    }
}

/// Collects the page's uncaught errors, rejected promises and CSP violations in
/// `window.__spexErrors`.
const ERROR_TRAP: &str = r"
window.__spexErrors = [];
window.addEventListener('error', e => window.__spexErrors.push('error: ' + (e.message || e.type)));
window.addEventListener('unhandledrejection', e => window.__spexErrors.push('rejection: ' + e.reason));
document.addEventListener('securitypolicyviolation', e => window.__spexErrors.push('csp: ' + e.violatedDirective + ' ' + e.blockedURI));
";

/// One tab.
pub struct Page {
    pub tab: Arc<Tab>,
}

impl Page {
    /// Makes this the tab in front: a headless browser draws only that one, and input to a tab
    /// behind another is never delivered (the click's call waits for it in vain).
    pub fn to_front(&self) {
        self.tab
            .bring_to_front()
            .unwrap_or_else(|e| panic!("Page.bringToFront: {e:#}"));
    }

    /// Closes the tab.
    pub fn close(&self) {
        let _ = self.tab.close(false);
    }

    /// Sets the tab's viewport (CSS pixels, device scale 1).
    pub fn set_viewport(&self, v: Viewport) {
        self.tab
            .call_method(Emulation::SetDeviceMetricsOverride {
                width: v.width,
                height: v.height,
                device_scale_factor: 1.0,
                mobile: v.mobile,
                scale: None,
                screen_width: None,
                screen_height: None,
                position_x: None,
                position_y: None,
                dont_set_visible_size: None,
                screen_orientation: None,
                viewport: None,
                display_feature: None,
                device_posture: None,
            })
            .expect("Emulation.setDeviceMetricsOverride");
        self.tab
            .call_method(Emulation::SetTouchEmulationEnabled {
                enabled: v.mobile,
                max_touch_points: None,
            })
            .expect("Emulation.setTouchEmulationEnabled");
    }

    /// Navigates to `url` and waits for its load event.
    pub fn goto(&self, url: &str) {
        self.tab
            .navigate_to(url)
            .and_then(|t| t.wait_until_navigated())
            .unwrap_or_else(|e| panic!("opening {url}: {e:#}"));
    }

    /// The tab's address now (after redirects and `history.replaceState`).
    pub fn url(&self) -> String {
        self.eval("location.href")
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The value of the JavaScript expression `js` (awaited when it is a promise), through
    /// JSON: `undefined` reads as `null`. Panics when it throws.
    pub fn eval(&self, js: &str) -> Value {
        self.try_eval(js)
            .unwrap_or_else(|e| panic!("evaluating `{js}`: {e}"))
    }

    /// [`Page::eval`], with what it threw as the `Err`.
    pub fn try_eval(&self, js: &str) -> Result<Value, String> {
        let expression = format!(
            "(async () => {{ const v = await ({js}); return v === undefined ? null : JSON.stringify(v); }})()"
        );
        let out = self
            .tab
            .call_method(Runtime::Evaluate {
                expression,
                return_by_value: Some(true),
                await_promise: Some(true),
                generate_preview: None,
                silent: Some(true),
                include_command_line_api: None,
                user_gesture: Some(true),
                object_group: None,
                context_id: None,
                throw_on_side_effect: None,
                timeout: None,
                disable_breaks: None,
                repl_mode: None,
                allow_unsafe_eval_blocked_by_csp: None,
                unique_context_id: None,
                serialization_options: None,
            })
            .map_err(|e| format!("{e:#}"))?;
        if let Some(ex) = out.exception_details {
            let what = ex.exception.and_then(|o| o.description).unwrap_or(ex.text);
            return Err(what);
        }
        match out.result.value {
            Some(Value::String(json)) => serde_json::from_str(&json).map_err(|e| e.to_string()),
            _ => Ok(Value::Null),
        }
    }

    /// The rendered text (`innerText`) of the first element matching `selector`, or `None` when
    /// none does.
    pub fn text_of(&self, selector: &str) -> Option<String> {
        let sel = js_string(selector);
        self.eval(&format!(
            "(e => e ? e.innerText : null)(document.querySelector({sel}))"
        ))
        .as_str()
        .map(str::to_owned)
    }

    /// [`Page::text_of`], which must match.
    pub fn text(&self, selector: &str) -> String {
        self.text_of(selector)
            .unwrap_or_else(|| panic!("no element `{selector}`\npage:\n{}", self.body_text()))
    }

    /// The rendered text of every element matching `selector`.
    pub fn texts(&self, selector: &str) -> Vec<String> {
        let sel = js_string(selector);
        let v = self.eval(&format!(
            "[...document.querySelectorAll({sel})].map(e => e.innerText)"
        ));
        serde_json::from_value(v).unwrap_or_default()
    }

    /// How many elements match `selector`.
    pub fn count(&self, selector: &str) -> usize {
        let sel = js_string(selector);
        let n = self.eval(&format!("document.querySelectorAll({sel}).length"));
        usize::try_from(n.as_u64().unwrap_or(0)).unwrap_or(0)
    }

    /// The whole page's rendered text (for diagnostics).
    pub fn body_text(&self) -> String {
        self.try_eval("document.body ? document.body.innerText : ''")
            .map_or_else(
                |e| format!("(unreadable: {e})"),
                |v| v.as_str().unwrap_or_default().to_owned(),
            )
    }

    /// The page's markup (for diagnostics and for checking what was rendered as text).
    pub fn html(&self) -> String {
        self.eval("document.documentElement.outerHTML")
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Clicks the first element matching `selector` with the mouse, at its middle, after
    /// scrolling it into view (waiting up to [`CALL_TIMEOUT`] for it to exist).
    pub fn click(&self, selector: &str) {
        self.to_front();
        let el = self.tab.wait_for_element(selector).unwrap_or_else(|e| {
            panic!(
                "no element `{selector}` to click: {e:#}\npage:\n{}",
                self.body_text()
            )
        });
        el.click()
            .unwrap_or_else(|e| panic!("clicking `{selector}`: {e:#}"));
    }

    /// Focuses the first element matching `selector` and types `text` into it, key by key.
    pub fn type_into(&self, selector: &str, text: &str) {
        self.to_front();
        let el = self.tab.wait_for_element(selector).unwrap_or_else(|e| {
            panic!(
                "no element `{selector}` to type into: {e:#}\npage:\n{}",
                self.body_text()
            )
        });
        el.click()
            .and_then(|el| el.focus())
            .unwrap_or_else(|e| panic!("focusing `{selector}`: {e:#}"));
        self.tab
            .type_str(text)
            .unwrap_or_else(|e| panic!("typing into `{selector}`: {e:#}"));
    }

    /// Presses one key (`"Enter"`, `"Tab"`, `"Escape"`) in the focused element.
    pub fn press(&self, key: &str) {
        self.tab
            .press_key(key)
            .unwrap_or_else(|e| panic!("pressing {key}: {e:#}"));
    }

    /// Polls the expression `js` every 25 ms until it is truthy (not `null`, `false`, `0` or
    /// `""`), and returns its value; panics after `timeout` with `what`, the last value or
    /// error, and the page's text.
    pub fn wait_for(&self, what: &str, js: &str, timeout: Duration) -> Value {
        let started = Instant::now();
        let mut last;
        loop {
            last = self.try_eval(js);
            if let Ok(v) = &last
                && truthy(v)
            {
                return v.clone();
            }
            if started.elapsed() > timeout {
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!(
            "waited {timeout:?} for {what} (`{js}`), last: {last:?}\npage:\n{}",
            self.body_text()
        )
    }

    /// [`Page::wait_for`], returning `None` on timeout instead of panicking.
    pub fn value_within(&self, js: &str, timeout: Duration) -> Option<Value> {
        let started = Instant::now();
        loop {
            if let Ok(v) = self.try_eval(js)
                && truthy(&v)
            {
                return Some(v);
            }
            if started.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Waits until the first element matching `selector` exists and its text contains
    /// `needle`; its text.
    pub fn wait_text(&self, selector: &str, needle: &str, timeout: Duration) -> String {
        let sel = js_string(selector);
        let want = js_string(needle);
        let v = self.wait_for(
            &format!("`{selector}` to show {needle:?}"),
            &format!(
                "(e => e && e.innerText.includes({want}) ? e.innerText : null)(document.querySelector({sel}))"
            ),
            timeout,
        );
        v.as_str().unwrap_or_default().to_owned()
    }

    /// Notes in the page the machine's time (`Date.now()`, ms since the epoch) at which the
    /// expression `js` first holds, checked now and on every change of the DOM (a
    /// `MutationObserver`, which runs before the change is painted); read it with
    /// [`Page::mark`]. A navigation forgets it.
    pub fn mark_when(&self, name: &str, js: &str) {
        let key = js_string(name);
        self.eval(&format!(
            "(() => {{
              const holds = () => {{ try {{ return !!({js}); }} catch (e) {{ return false; }} }};
              const marks = window.__spexMarks = window.__spexMarks || {{}};
              delete marks[{key}];
              if (holds()) {{ marks[{key}] = Date.now(); return; }}
              const o = new MutationObserver(() => {{
                if (holds()) {{ marks[{key}] = Date.now(); o.disconnect(); }}
              }});
              o.observe(document, {{ subtree: true, childList: true, characterData: true, attributes: true }});
            }})()"
        ));
    }

    /// The time noted by [`Page::mark_when`] `name`, once its expression held.
    pub fn mark(&self, name: &str) -> Option<std::time::SystemTime> {
        let key = js_string(name);
        let ms = self
            .eval(&format!("(window.__spexMarks || {{}})[{key}]"))
            .as_u64()?;
        Some(std::time::UNIX_EPOCH + Duration::from_millis(ms))
    }

    /// Waits up to `timeout` for the mark `name`; panics saying what it waited for.
    pub fn wait_mark(&self, name: &str, timeout: Duration) -> std::time::SystemTime {
        let key = js_string(name);
        self.wait_for(
            &format!("mark {name:?}"),
            &format!("(window.__spexMarks || {{}})[{key}]"),
            timeout,
        );
        self.mark(name).expect("the mark is set")
    }

    /// A PNG of the viewport as it is drawn now.
    pub fn screenshot_png(&self) -> Vec<u8> {
        self.to_front();
        self.tab
            .capture_screenshot(Cdp::CaptureScreenshotFormatOption::Png, None, None, true)
            .expect("Page.captureScreenshot")
    }

    /// How many CSS pixels the page is wider than its viewport (0 when it does not scroll
    /// sideways): `document.scrollingElement.scrollWidth - innerWidth`.
    pub fn horizontal_overflow(&self) -> i64 {
        self.eval("document.scrollingElement.scrollWidth - window.innerWidth")
            .as_i64()
            .expect("a number")
    }

    /// What the page threw, rejected or had blocked by its Content-Security-Policy so far.
    pub fn errors(&self) -> Vec<String> {
        serde_json::from_value(self.eval("window.__spexErrors || []")).unwrap_or_default()
    }
}

/// `s` as a JavaScript string literal.
pub fn js_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// JavaScript's truthiness of a JSON value.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}
