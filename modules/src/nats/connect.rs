//! Reaching a broker: TLS (certificates verified by default, through
//! `dnsluice_net`'s rustls with ring), and credentials only from files or
//! the environment — a `.creds` file (JWT and nkey seed), an nkey seed
//! file, or a user and password in environment variables. Nothing secret
//! is taken from the command line, and no error or statistic repeats it.
//!
//! A [`Link`] also watches its connection: how long it has been down, so a
//! stage can give up after `reconnect_for` and say what it left in flight.

use super::address::NatsAddress;
use dnsluice_core::sync;
use dnsluice_net::TlsOptions;
use dnsluice_options::Options;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How `input.nats`, `output.nats` and `dnsluice queue` authenticate and
/// verify the broker (a group embedded with `#[option(flatten)]`).
#[derive(Clone, Debug, Options)]
pub struct NatsAuthOptions {
    /// A NATS credentials file (`.creds`: a user JWT and its nkey seed).
    pub creds: Option<PathBuf>,
    /// A file holding an nkey seed (`SU...`), for nkey authentication.
    pub nkey_file: Option<PathBuf>,
    /// The environment variable holding the user name (used when it and
    /// `password_env`'s variable are both set).
    #[option(default = "NATS_USER".to_string())]
    pub user_env: String,
    /// The environment variable holding the password.
    #[option(default = "NATS_PASSWORD".to_string())]
    pub password_env: String,
    /// Certificates, for `tls://` addresses (or any address when `ca_file`
    /// is given). `tls_name` is not supported: the certificate must name the
    /// host of the URL.
    #[option(flatten)]
    pub tls: TlsOptions,
    /// How long to wait for the first connection.
    #[option(default = Duration::from_secs(5), range = Duration::from_millis(10)..=Duration::from_secs(600))]
    pub connect_timeout: Duration,
    /// How long a lost connection may stay lost (reconnecting with backoff)
    /// before the stage gives up with an error.
    #[option(default = Duration::from_secs(60), range = Duration::from_secs(1)..=Duration::from_secs(86_400))]
    pub reconnect_for: Duration,
}

/// A connection and its health.
#[derive(Clone)]
pub struct Link {
    /// The client (cheap to clone).
    pub client: async_nats::Client,
    /// Where it goes (for messages).
    pub address: NatsAddress,
    down_since: Arc<Mutex<Option<Instant>>>,
    reconnect_for: Duration,
}

impl Link {
    /// The JetStream context on this connection. Requests and publish
    /// acks time out after 5 s (so a publish lost in a broker restart is
    /// sent again soon).
    pub fn jetstream(&self) -> async_nats::jetstream::Context {
        // The context starts a task of its own: on the shared runtime.
        let _inside = super::runtime::get().enter();
        async_nats::jetstream::ContextBuilder::new()
            .timeout(Duration::from_secs(5))
            .ack_timeout(Duration::from_secs(5))
            .build(self.client.clone())
    }

    /// An error when the connection has been down longer than `reconnect_for`.
    pub fn check_alive(&self) -> Result<(), String> {
        let down = *sync::lock(&self.down_since);
        match down {
            Some(since) if since.elapsed() >= self.reconnect_for => Err(format!(
                "lost the connection to {} and could not reconnect for {:.0?}",
                self.address, self.reconnect_for
            )),
            _ => Ok(()),
        }
    }

    /// How long the connection may stay lost before a stage gives up.
    pub fn reconnect_for(&self) -> Duration {
        self.reconnect_for
    }

    /// Whether the connection is up now.
    pub fn is_up(&self) -> bool {
        sync::lock(&self.down_since).is_none()
    }
}

/// Connects to `address` with `auth`; the error names the address and, for a
/// refused login, says so (never repeating a secret).
pub async fn connect(address: &NatsAddress, auth: &NatsAuthOptions) -> Result<Link, String> {
    let named = |what: String| format!("{address}: {what}");
    let mut options = async_nats::ConnectOptions::new()
        .name("dnsluice")
        .connection_timeout(auth.connect_timeout)
        .reconnect_delay_callback(reconnect_delay);
    if let Some(path) = &auth.creds {
        options = options.credentials_file(path).await.map_err(|e| {
            named(format!(
                "cannot read the credentials file {}: {e}",
                path.display()
            ))
        })?;
    }
    if let Some(path) = &auth.nkey_file {
        let seed = std::fs::read_to_string(path)
            .map_err(|e| named(format!("cannot read the nkey file {}: {e}", path.display())))?;
        options = options.nkey(seed.trim().to_string());
    }
    match (
        std::env::var(&auth.user_env),
        std::env::var(&auth.password_env),
    ) {
        (Ok(user), Ok(password)) if !user.is_empty() => {
            options = options.user_and_password(user, password);
        }
        (Ok(_), Err(_)) => {
            return Err(named(format!(
                "${} is set but ${} is not: set both, or neither",
                auth.user_env, auth.password_env
            )))
        }
        // A password without its user (or with an empty one) would log in
        // with no user at all, silently.
        (Ok(_) | Err(_), Ok(_)) => {
            return Err(named(format!(
                "${} is set but ${} is not (or is empty): set both, or neither",
                auth.password_env, auth.user_env
            )))
        }
        _ => {}
    }
    if auth.tls.server_name.is_some() {
        return Err(named(
            "tls_name is not supported for NATS: the broker's certificate must name the host in the URL"
                .to_string(),
        ));
    }
    if address.tls || auth.tls.ca_file.is_some() || auth.tls.insecure {
        let config =
            dnsluice_net::tls::client_config(&auth.tls, &[]).map_err(|e| named(e.to_string()))?;
        options = options
            .require_tls(true)
            .tls_client_config((*config).clone());
    }
    let down_since = Arc::new(Mutex::new(None));
    let watched = down_since.clone();
    options = options.event_callback(move |event| {
        let watched = watched.clone();
        async move {
            let mut down = sync::lock(&watched);
            match event {
                async_nats::Event::Disconnected => {
                    down.get_or_insert_with(Instant::now);
                }
                async_nats::Event::Connected => *down = None,
                _ => {}
            }
        }
    });
    let client = options
        .connect(address.server_urls())
        .await
        .map_err(|e| named(describe_connect_error(&e)))?;
    Ok(Link {
        client,
        address: address.clone(),
        down_since,
        reconnect_for: auth.reconnect_for,
    })
}

/// How long to wait before connection attempt `attempts` (counted from 1,
/// the first connect): no wait for the first, then 200 ms, 400 ms, ... at
/// most 2 s between tries. (async-nats asks before the very first attempt
/// too: a delay there would slow every command's start.)
fn reconnect_delay(attempts: usize) -> Duration {
    if attempts <= 1 {
        return Duration::ZERO;
    }
    Duration::from_millis(100u64 << (attempts - 1).min(5)).min(Duration::from_secs(2))
}

fn describe_connect_error(e: &async_nats::ConnectError) -> String {
    use async_nats::ConnectErrorKind as Kind;
    match e.kind() {
        Kind::AuthorizationViolation => {
            "the broker refused the login (authorization violation: wrong user, password or credentials?)"
                .to_string()
        }
        Kind::Authentication => format!("cannot sign the login with the nkey or credentials: {e}"),
        Kind::TimedOut => "no answer from the broker (connection timed out)".to_string(),
        Kind::Tls => format!("TLS failed: {e}"),
        Kind::Io | Kind::Dns | Kind::MaxReconnects => format!("cannot reach the broker: {e}"),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::reconnect_delay;
    use std::time::Duration;

    #[test]
    fn the_first_attempt_waits_nothing_then_the_wait_doubles_up_to_two_seconds() {
        let waits: Vec<Duration> = (1..=7).map(reconnect_delay).collect();
        let ms = |n| Duration::from_millis(n);
        assert_eq!(
            waits,
            [
                ms(0),
                ms(200),
                ms(400),
                ms(800),
                ms(1600),
                ms(2000),
                ms(2000)
            ]
        );
    }
}
