//! Headless Chromium driven over the DevTools protocol, for tests that open
//! a page as a person would and check what the browser saw: console
//! messages and errors, every network request, values computed in the page,
//! and a screenshot.
//!
//! Chromium (Debian's `chromium`) is started as the machine needs it here
//! (`--no-sandbox` as root; no background networking, component updates,
//! sync or QUIC, so it makes no connection of its own) with a fresh profile
//! directory and `--remote-debugging-port=0`; the port it picked is read from
//! its "DevTools listening on ws://..." line. The protocol runs over a
//! WebSocket, for which a small client is here (text frames, masked from
//! us, fragmented or not from the browser; pings answered). Every wait has
//! a generous timeout, so a loaded machine makes a test slow, not flaky.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long any one step may take.
const TIMEOUT: Duration = Duration::from_secs(90);

/// A running browser with one page attached.
pub struct Browser {
    child: Child,
    ws: WebSocket,
    next_id: u64,
    session: String,
    /// Events of the page since the last [`Browser::open`].
    events: Vec<Value>,
    profile: PathBuf,
}

/// What the browser saw while a page opened.
#[derive(Debug, Default)]
pub struct Visit {
    /// URLs of every request the page made (the document's own included).
    pub requests: Vec<String>,
    /// Console messages of level error or warning, exceptions, and log
    /// entries of level error (failed loads, security errors).
    pub errors: Vec<String>,
}

impl Browser {
    /// Starts Chromium and attaches to a blank page. `scratch` is a directory
    /// for the profile (it is emptied first) and Chromium's temporary files
    /// (its TMPDIR: its lock socket would be left in /tmp otherwise).
    pub fn start(scratch: &Path) -> Browser {
        let profile = scratch.join("chromium-profile");
        let _ = std::fs::remove_dir_all(&profile);
        std::fs::create_dir_all(&profile).expect("profile directory");
        let mut child = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--remote-debugging-port=0",
                "--remote-allow-origins=*",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .env("TMPDIR", scratch)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("chromium runs (apt-get install chromium)");
        let stderr = child.stderr.take().expect("piped stderr");
        let (found, url) = mpsc::channel();
        // Reads stderr to its end, so the browser never blocks on it.
        std::thread::spawn(move || {
            let mut found = Some(found);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(at) = line.find("ws://") {
                    if let Some(found) = found.take() {
                        let _ = found.send(line[at..].trim().to_string());
                    }
                }
            }
        });
        let url = url
            .recv_timeout(TIMEOUT)
            .expect("chromium says where DevTools listen");
        let ws = WebSocket::connect(&url);
        let mut browser = Browser {
            child,
            ws,
            next_id: 0,
            session: String::new(),
            events: Vec::new(),
            profile,
        };
        let target = browser.call("Target.createTarget", json!({"url": "about:blank"}));
        let target_id = target["targetId"]
            .as_str()
            .expect("a target id")
            .to_string();
        let attached = browser.call(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
        );
        browser.session = attached["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string();
        for domain in ["Page", "Runtime", "Log", "Network"] {
            browser.call(&format!("{domain}.enable"), json!({}));
        }
        browser
    }

    /// Sends `method` (to the page once attached) and waits for its result,
    /// keeping the page's events that arrive meanwhile.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        self.ws.send(&message.to_string());
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let reply = self.next_message(deadline, method);
            if reply["id"] == id {
                if let Some(error) = reply.get("error") {
                    panic!("{method}: {error}");
                }
                return reply["result"].clone();
            }
        }
    }

    fn next_message(&mut self, deadline: Instant, waiting_for: &str) -> Value {
        assert!(
            Instant::now() < deadline,
            "no answer from chromium for {waiting_for} in {TIMEOUT:?}"
        );
        let text = self.ws.receive();
        let message: Value = serde_json::from_str(&text).expect("DevTools messages are JSON");
        if message.get("method").is_some() {
            self.events.push(message.clone());
        }
        message
    }

    /// Opens `url`, waits until it has loaded, and says what it requested
    /// and which errors it caused.
    pub fn open(&mut self, url: &str) -> Visit {
        self.events.clear();
        let navigated = self.call("Page.navigate", json!({"url": url}));
        assert!(
            navigated.get("errorText").is_none(),
            "{url}: {}",
            navigated["errorText"]
        );
        let deadline = Instant::now() + TIMEOUT;
        while !self
            .events
            .iter()
            .any(|e| e["method"] == "Page.loadEventFired")
        {
            self.next_message(deadline, "Page.loadEventFired");
        }
        // Anything the page does right after its load event is in by the
        // time a round trip through the page's own thread comes back.
        self.evaluate("new Promise(r => setTimeout(() => r(1), 200))");
        let mut visit = Visit::default();
        for event in &self.events {
            let p = &event["params"];
            match event["method"].as_str() {
                Some("Network.requestWillBeSent") => visit
                    .requests
                    .push(p["request"]["url"].as_str().unwrap_or("?").to_string()),
                Some("Runtime.consoleAPICalled")
                    if matches!(p["type"].as_str(), Some("error" | "warning" | "assert")) =>
                {
                    visit
                        .errors
                        .push(format!("console.{}: {}", p["type"], p["args"]))
                }
                Some("Runtime.exceptionThrown") => visit
                    .errors
                    .push(format!("exception: {}", p["exceptionDetails"])),
                Some("Log.entryAdded") if p["entry"]["level"] == "error" => {
                    visit.errors.push(format!("log: {}", p["entry"]))
                }
                _ => {}
            }
        }
        visit
    }

    /// The value of the JavaScript expression `expression` in the page
    /// (promises awaited), as JSON.
    pub fn evaluate(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        if let Some(e) = result.get("exceptionDetails") {
            panic!("{expression}: {e}");
        }
        result["result"]["value"].clone()
    }

    /// A PNG of the whole page, `width` CSS pixels wide.
    pub fn screenshot(&mut self, width: u32) -> Vec<u8> {
        use base64::Engine as _;
        let set = |b: &mut Browser, height: u32| {
            b.call(
                "Emulation.setDeviceMetricsOverride",
                json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
            );
        };
        set(self, 900);
        let height = self.evaluate("document.documentElement.scrollHeight");
        set(
            self,
            height.as_u64().unwrap_or(900).clamp(100, 16_000) as u32,
        );
        let shot = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true}),
        );
        base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().expect("screenshot data"))
            .expect("base64 PNG")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// A WebSocket client: enough of RFC 6455 for the DevTools protocol.
struct WebSocket {
    stream: TcpStream,
}

impl WebSocket {
    /// Connects to `url` (`ws://HOST:PORT/PATH`) and upgrades.
    fn connect(url: &str) -> WebSocket {
        let rest = url.strip_prefix("ws://").expect("a ws:// URL");
        let (host, path) = rest.split_once('/').expect("a path");
        let mut stream = TcpStream::connect(host).expect("connect to DevTools");
        stream.set_read_timeout(Some(TIMEOUT)).expect("timeout");
        let request = format!(
            "GET /{path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        stream
            .write_all(request.as_bytes())
            .expect("upgrade request");
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            stream.read_exact(&mut byte).expect("upgrade response");
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head);
        assert!(head.starts_with("HTTP/1.1 101"), "not upgraded: {head}");
        WebSocket { stream }
    }

    /// Sends `text` as one masked text frame.
    fn send(&mut self, text: &str) {
        self.frame(0x1, text.as_bytes());
    }

    fn frame(&mut self, opcode: u8, payload: &[u8]) {
        let mut frame = vec![0x80 | opcode];
        match payload.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n if n <= 0xffff => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        let mask = [0x1d, 0x7a, 0x53, 0xc4];
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.stream.write_all(&frame).expect("write to DevTools");
    }

    /// The next text message (continuation frames joined, pings answered).
    fn receive(&mut self) -> String {
        let mut message = Vec::new();
        loop {
            let mut head = [0u8; 2];
            self.stream
                .read_exact(&mut head)
                .expect("a frame from DevTools");
            let (fin, opcode) = (head[0] & 0x80 != 0, head[0] & 0x0f);
            let len = match head[1] & 0x7f {
                126 => {
                    let mut b = [0u8; 2];
                    self.stream.read_exact(&mut b).expect("length");
                    u64::from(u16::from_be_bytes(b))
                }
                127 => {
                    let mut b = [0u8; 8];
                    self.stream.read_exact(&mut b).expect("length");
                    u64::from_be_bytes(b)
                }
                n => u64::from(n),
            };
            let mut payload = vec![0u8; len as usize];
            self.stream.read_exact(&mut payload).expect("payload");
            match opcode {
                0x8 => panic!("DevTools closed the connection"),
                0x9 => self.frame(0xA, &payload),
                0xA => {}
                _ => {
                    message.extend_from_slice(&payload);
                    if fin {
                        return String::from_utf8(message).expect("UTF-8 text");
                    }
                }
            }
        }
    }
}
