//! Takes a PNG of a running dashboard with headless Chromium, driven over the DevTools
//! protocol: once the page shows its breakers and follows the event stream, plus `--settle`
//! milliseconds. `docs/dashboard-screenshot.sh` uses it for the README's picture of the demo's
//! outage.
//!
//! ```text
//! cargo run -p breaker-admin --example screenshot -- http://127.0.0.1:PORT/ docs/dashboard.png
//! ```
//!
//! The browser is `$CHROME`, else `chromium` on the `PATH`.

use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::page::ScreenshotParams;
use futures_util::StreamExt;
use std::time::{Duration, Instant};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: screenshot URL OUT.png [--settle MS]";
    let url = args.next().ok_or(usage)?;
    let out = args.next().ok_or(usage)?;
    let settle = match (args.next().as_deref(), args.next()) {
        (Some("--settle"), Some(ms)) => Duration::from_millis(ms.parse()?),
        (None, _) => Duration::from_millis(1500),
        _ => return Err(usage.into()),
    };
    let exe = match std::env::var_os("CHROME") {
        Some(p) => std::path::PathBuf::from(p),
        None => std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|dir| dir.join("chromium"))
            .find(|p| p.is_file())
            .ok_or("no `chromium` on the PATH; set CHROME")?,
    };
    let profile = std::env::temp_dir().join(format!("breaker-screenshot-{}", std::process::id()));
    let config = BrowserConfig::builder()
        .chrome_executable(&exe)
        .disable_default_args()
        .no_sandbox()
        .user_data_dir(&profile)
        .window_size(1400, 820)
        .viewport(None)
        .args([
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .build()?;
    let (mut browser, mut handler) = Browser::launch(config).await?;
    let events = tokio::spawn(async move { while handler.next().await.is_some() {} });
    let page = browser.new_page(url.as_str()).await?;
    let ready = "document.querySelectorAll('tbody tr[data-id]').length > 0 \
                 && document.querySelector('#stream').textContent === 'live'";
    let deadline = Instant::now() + Duration::from_secs(20);
    while !page.evaluate(ready).await?.into_value::<bool>()? {
        if Instant::now() > deadline {
            return Err(format!("{url}: no breaker shown after 20 s").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(settle).await;
    let png = page.screenshot(ScreenshotParams::builder().build()).await?;
    std::fs::write(&out, png)?;
    println!("wrote {out}");
    browser.close().await?;
    let _ = browser.wait().await;
    events.abort();
    let _ = std::fs::remove_dir_all(&profile);
    Ok(())
}
