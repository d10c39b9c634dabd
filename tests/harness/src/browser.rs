//! A real browser for the page tests (the operator console, the pay-a-bill page): headless
//! Chromium driven over WebDriver (fantoccini) through a chromedriver process the test starts on
//! a free loopback port and kills when done. Every wait is bounded ([`PATIENCE`]) and polls what
//! the page shows; none sleeps and hopes.

use std::future::Future;
use std::net::{Ipv4Addr, TcpListener};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use futures_util::FutureExt;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

/// Debian's chromedriver (package `chromium-driver`; `scripts/setup-tools.sh` installs it).
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Debian's Chromium (package `chromium`).
const CHROMIUM: &str = "/usr/bin/chromium";
/// The longest the test waits for any one thing the page should show.
pub const PATIENCE: Duration = Duration::from_secs(20);
/// How long chromedriver may take to reply to its first status request.
const DRIVER_START_PATIENCE: Duration = Duration::from_secs(15);
/// How often a wait looks again.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// A chromedriver process listening on `127.0.0.1`, killed when dropped (a failed test too).
pub struct ChromeDriver {
    process: Child,
    url: String,
}

impl ChromeDriver {
    /// Starts chromedriver on a free loopback port and waits until it says it is ready.
    pub async fn start() -> ChromeDriver {
        assert!(
            Path::new(CHROMEDRIVER).exists() && Path::new(CHROMIUM).exists(),
            "the console's browser test needs {CHROMIUM} and {CHROMEDRIVER}: \
             scripts/setup-tools.sh installs them (apt-get install chromium chromium-driver)"
        );
        let port = free_loopback_port();
        let process = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("start {CHROMEDRIVER}: {error}"));
        let mut driver = ChromeDriver {
            process,
            url: format!("http://127.0.0.1:{port}"),
        };
        driver.wait_until_ready().await;
        driver
    }

    /// Polls `GET /status` until chromedriver replies `"ready": true`; fails early if it exited.
    async fn wait_until_ready(&mut self) {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .expect("an HTTP client");
        let started = Instant::now();
        loop {
            if let Some(status) = self.process.try_wait().expect("chromedriver's status") {
                panic!("chromedriver exited before it was ready: {status}");
            }
            let reply = http.get(format!("{}/status", self.url)).send().await;
            if let Ok(response) = reply
                && let Ok(status) = response.json::<Value>().await
                && status["value"]["ready"] == json!(true)
            {
                return;
            }
            assert!(
                started.elapsed() < DRIVER_START_PATIENCE,
                "chromedriver at {} not ready after {DRIVER_START_PATIENCE:?}",
                self.url
            );
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }
}

impl Drop for ChromeDriver {
    fn drop(&mut self) {
        // Already gone is fine: there is nothing left to stop.
        self.process.kill().ok();
        self.process.wait().ok();
    }
}

/// A port that was free on `127.0.0.1` a moment ago (the OS picks it; chromedriver binds it).
fn free_loopback_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

/// One headless Chromium window (1280×900) in a WebDriver session.
pub struct Browser {
    client: Client,
}

impl Browser {
    /// Opens a session on `driver`, runs `scenario` in it, and closes the browser whether the
    /// scenario passed or panicked (then the panic goes on).
    pub async fn run<F>(driver: &ChromeDriver, scenario: impl FnOnce(Browser) -> F)
    where
        F: Future<Output = ()>,
    {
        let browser = Browser::open(driver).await;
        let session = browser.client.clone();
        let outcome = AssertUnwindSafe(scenario(browser)).catch_unwind().await;
        let closed = session.close().await;
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
        closed.expect("the browser closes");
    }

    async fn open(driver: &ChromeDriver) -> Browser {
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"],
            },
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!("a JSON object literal")
        };
        // chromedriver speaks plain HTTP on loopback: no TLS connector is needed.
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&driver.url)
            .await
            .unwrap_or_else(|error| panic!("a Chromium session from chromedriver: {error}"));
        Browser { client }
    }

    /// Loads `url`.
    pub async fn goto(&self, url: &str) {
        self.client
            .goto(url)
            .await
            .unwrap_or_else(|error| panic!("load {url}: {error}"));
    }

    /// Reloads the page, as the user's reload button does.
    pub async fn reload(&self) {
        self.client
            .refresh()
            .await
            .unwrap_or_else(|error| panic!("reload: {error}"));
    }

    /// The element `css` selects, once the page shows it.
    pub async fn find(&self, css: &str) -> Element {
        self.wait_for(&format!("an element `{css}`"), || async {
            self.client.find(Locator::Css(css)).await.ok()
        })
        .await
    }

    /// Clicks the element `css` selects, once the page shows it.
    pub async fn click(&self, css: &str) {
        self.find(css)
            .await
            .click()
            .await
            .unwrap_or_else(|error| panic!("click `{css}`: {error}"));
    }

    /// Empties the input `css` selects and types `text` into it, key by key.
    pub async fn type_into(&self, css: &str, text: &str) {
        let input = self.find(css).await;
        input
            .clear()
            .await
            .unwrap_or_else(|error| panic!("clear `{css}`: {error}"));
        input
            .send_keys(text)
            .await
            .unwrap_or_else(|error| panic!("type into `{css}`: {error}"));
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page until it returns
    /// something other than `null`, and returns that: a read of the page in one step, with no
    /// element that a re-render can make stale in between.
    pub async fn wait_for_script(&self, what: &str, script: &str, args: Vec<Value>) -> Value {
        self.wait_for(what, || async {
            match self.client.execute(script, args.clone()).await {
                Ok(Value::Null) | Err(_) => None,
                Ok(value) => Some(value),
            }
        })
        .await
    }

    /// Scrolls the element `subject` selects into view (all of it, if it fits the window) and
    /// saves what the window shows as `name` under every screenshot folder ([`screenshot_dirs`]).
    pub async fn screenshot(&self, name: &str, subject: &str) {
        self.client
            .execute(
                "const subject = document.querySelector(arguments[0]);
                 const fits = subject.getBoundingClientRect().height <= window.innerHeight;
                 subject.scrollIntoView({ block: fits ? 'end' : 'start', behavior: 'instant' });",
                vec![json!(subject)],
            )
            .await
            .unwrap_or_else(|error| panic!("scroll `{subject}` into view for {name}: {error}"));
        let png = self
            .client
            .screenshot()
            .await
            .unwrap_or_else(|error| panic!("screenshot {name}: {error}"));
        for dir in screenshot_dirs() {
            std::fs::create_dir_all(&dir)
                .unwrap_or_else(|error| panic!("create {}: {error}", dir.display()));
            let path = dir.join(name);
            std::fs::write(&path, &png)
                .unwrap_or_else(|error| panic!("write {}: {error}", path.display()));
        }
    }

    /// Polls `probe` until it gives a value; after [`PATIENCE`] fails naming `what` and saying
    /// what the page last announced.
    async fn wait_for<T, F>(&self, what: &str, mut probe: impl FnMut() -> F) -> T
    where
        F: Future<Output = Option<T>>,
    {
        let started = Instant::now();
        loop {
            if let Some(found) = probe().await {
                return found;
            }
            if started.elapsed() >= PATIENCE {
                let shown = self
                    .client
                    .execute("return document.body.innerText.slice(0, 2000);", vec![])
                    .await
                    .unwrap_or(Value::Null);
                panic!("gave up after {PATIENCE:?} waiting for {what}; the page showed {shown}");
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }
}

/// Where screenshots go: always `screenshots/` in the target folder (`$CARGO_TARGET_DIR`, else
/// the workspace's `target/`), and also `$SCREENSHOTS_DIR` when set (as
/// `SCREENSHOTS_DIR=docs/images` to refresh the docs' pictures). A relative folder is taken from
/// the workspace root.
fn screenshot_dirs() -> Vec<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"));
    let mut dirs = vec![workspace.join(target).join("screenshots")];
    if let Some(extra) = std::env::var_os("SCREENSHOTS_DIR") {
        dirs.push(workspace.join(extra));
    }
    dirs
}
