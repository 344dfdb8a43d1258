//! Runs `kdig` (knot-dnsutils) for many questions in one process and reads
//! its text output: the independent client that the world's tests compare
//! answers with. Records come back as [`Rr`] with their data in kdig's
//! presentation form, normalised by [`normalise_data`].

use std::process::Command;

use crate::world::{normalise_data, Rr};

/// One question for kdig.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// The name, absolute.
    pub name: String,
    /// The type mnemonic.
    pub rtype: String,
    /// The class mnemonic, `IN` or `CH`.
    pub class: String,
}

/// What came back for one question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The rcode mnemonic (`NOERROR`, `NXDOMAIN`, ...).
    pub rcode: String,
    /// The header flags kdig lists (`qr`, `aa`, `tc`, `rd`, `ra`).
    pub flags: Vec<String>,
    /// The answer section, in the order received; with `+authority` or
    /// `+additional` in `extra`, those sections' records follow it.
    pub answers: Vec<Rr>,
}

impl Reply {
    /// The header has `flag` (`aa`, `tc`, ...).
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
}

/// Asks `server` (an IPv4 or IPv6 address, port `port`) every question in
/// one kdig run, with recursion desired when `rd`, and returns a reply or
/// an error for each question, in order. `extra` are more kdig options
/// (`+tcp`, `+timeout=N`, ...).
///
/// # Panics
///
/// When kdig cannot be run (it is not installed).
pub fn ask(
    server: &str,
    port: u16,
    rd: bool,
    questions: &[Question],
    extra: &[&str],
) -> Vec<Result<Reply, String>> {
    let mut cmd = Command::new("kdig");
    cmd.arg(format!("@{server}"))
        .args(["-p", &port.to_string()])
        .args(["+noall", "+header", "+question", "+answer"])
        .arg(if rd { "+rec" } else { "+norec" })
        .args(extra);
    for q in questions {
        cmd.args([&q.name, &q.class, &q.rtype]);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run kdig (apt-get install knot-dnsutils): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut blocks = parse_blocks(&stdout).into_iter().peekable();
    questions
        .iter()
        .map(|q| match blocks.peek() {
            Some((asked, _))
                if asked.name == q.name.to_ascii_lowercase()
                    && asked.rtype == q.rtype
                    && asked.class == q.class =>
            {
                Ok(blocks.next().expect("peeked").1)
            }
            _ => Err(format!(
                "no reply from {server} to {} {} {}",
                q.name, q.class, q.rtype
            )),
        })
        .collect()
}

/// Transfers `zone` from `server` (port 53) with AXFR: its records, or the
/// rcode or error kdig reports (`NOTAUTH`, `REFUSED`, ...).
///
/// # Panics
///
/// When kdig cannot be run.
pub fn axfr(server: &str, zone: &str) -> Result<Vec<Rr>, String> {
    let out = Command::new("kdig")
        .arg(format!("@{server}"))
        .args([zone, "AXFR", "+noall", "+answer", "+timeout=5"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run kdig (apt-get install knot-dnsutils): {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(rest) = stderr.split("replied with error '").nth(1) {
        return Err(rest.split('\'').next().unwrap_or_default().to_owned());
    }
    if !out.status.success() {
        return Err(stderr.trim().to_owned());
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with(';'))
        .map(parse_record)
        .collect()
}

/// Splits kdig's output into (question, reply) per message.
fn parse_blocks(text: &str) -> Vec<(Question, Reply)> {
    let mut out: Vec<(Question, Reply)> = Vec::new();
    let mut rcode = None;
    let mut flags = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(";; ->>HEADER<<-") {
            rcode = rest
                .split("status: ")
                .nth(1)
                .and_then(|s| s.split(';').next())
                .map(str::to_owned);
        } else if let Some(rest) = line.strip_prefix(";; Flags:") {
            flags = rest
                .split(';')
                .next()
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect();
        } else if line.trim().is_empty() {
            continue;
        } else if let Some(q) = line.strip_prefix(";;") {
            let f: Vec<&str> = q.split_whitespace().collect();
            if let (Some(code), [name, class, rtype]) = (rcode.take(), f.as_slice()) {
                let question = Question {
                    name: name.to_ascii_lowercase(),
                    rtype: (*rtype).to_owned(),
                    class: (*class).to_owned(),
                };
                let reply = Reply {
                    rcode: code,
                    flags: std::mem::take(&mut flags),
                    answers: Vec::new(),
                };
                out.push((question, reply));
            }
        } else if !line.starts_with(';') {
            if let (Some((_, reply)), Ok(rr)) = (out.last_mut(), parse_record(line)) {
                reply.answers.push(rr);
            }
        }
    }
    out
}

/// `name ttl class type data...` as kdig prints a record.
fn parse_record(line: &str) -> Result<Rr, String> {
    let mut f = line.split_whitespace();
    let mut next = |what: &str| f.next().ok_or_else(|| format!("no {what} in `{line}`"));
    let name = next("name")?.to_ascii_lowercase();
    let ttl = next("ttl")?
        .parse()
        .map_err(|e| format!("ttl in `{line}`: {e}"))?;
    let _class = next("class")?;
    let rtype = next("type")?.to_owned();
    let data = normalise_data(&f.collect::<Vec<_>>().join(" "));
    Ok(Rr {
        name,
        rtype,
        ttl,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kdig_blocks_and_keeps_them_with_their_question() {
        let text = ";; ->>HEADER<<- opcode: QUERY; status: NOERROR; id: 1\n\
            ;; Flags: qr rd ra; QUERY: 1; ANSWER: 2; AUTHORITY: 0; ADDITIONAL: 0\n\
            ;;www.A.com.    \t\tIN\tA\n\
            www.a.com.    \t3600\tIN\tCNAME\tb.com.\n\
            b.com.    \t3599\tIN\tA\t192.0.2.1\n\n\
            ;; ->>HEADER<<- opcode: QUERY; status: NXDOMAIN; id: 2\n\
            ;; Flags: qr rd ra; QUERY: 1; ANSWER: 0; AUTHORITY: 1; ADDITIONAL: 0\n\
            ;;nx.com.     \t\tIN\tA\n";
        let blocks = parse_blocks(text);
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].0.name, "www.a.com.");
        assert!(blocks[0].1.has_flag("ra") && !blocks[0].1.has_flag("aa"));
        assert_eq!(blocks[0].1.answers[1].ttl, 3599);
        assert_eq!(blocks[0].1.answers[1].data, "192.0.2.1");
        assert_eq!(blocks[1].1.rcode, "NXDOMAIN");
        assert!(blocks[1].1.answers.is_empty());
        let rr = parse_record("loc.x.\t60\tIN\tLOC\t52 22 23 N  4 53 32 E  -2m").unwrap();
        assert_eq!(rr.data, "52 22 23 N 4 53 32 E -2m");
    }
}
