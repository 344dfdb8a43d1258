//! `dnsluice lookup --resume`: a scan that was stopped (killed at any
//! point, the machine lost) goes on where it was. The output file is read:
//! every whole record's `name` is done; a last line cut short by the kill
//! is cut off; the names done are skipped in the input, and new records are
//! appended. Restarted as often as need be, the file ends with one record
//! per name of the input (names are told apart by their text, as records
//! carry them).

use anyhow::{bail, Context, Result};
use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader};
use std::path::Path;

/// What an earlier run left in the output file.
#[derive(Debug, Default)]
pub struct Done {
    /// The names that have their record.
    pub names: HashSet<String>,
    /// Bytes of a cut-short last line that were removed.
    pub cut: u64,
}

/// The `name` of a record, without reading the rest of it into a tree.
#[derive(serde::Deserialize)]
struct Named {
    name: String,
}

/// Reads the records in `path` (none when it does not exist), and cuts a
/// last line that is not a whole record. A line in the middle that is not
/// a record is an error: the file is not one this command wrote.
pub fn read_done(path: &Path) -> Result<Done> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Done::default()),
        Err(e) => {
            return Err(e).with_context(|| format!("--resume: cannot read {}", path.display()))
        }
    };
    let total = file.metadata()?.len();
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut done = Done::default();
    let (mut whole, mut line, mut number) = (0u64, Vec::new(), 0u64);
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .with_context(|| format!("--resume: cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        number += 1;
        let record = line
            .strip_suffix(b"\n")
            .and_then(|text| serde_json::from_slice::<Named>(text).ok());
        match record {
            Some(record) => {
                done.names.insert(record.name);
                whole += n as u64;
            }
            // The last line, cut short when the run was killed.
            None if whole + n as u64 == total => break,
            None => bail!(
                "--resume: {} line {number} is not a lookup record: is it this command's output?",
                path.display()
            ),
        }
    }
    if whole < total {
        OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|f| f.set_len(whole))
            .with_context(|| format!("--resume: cannot cut the last line of {}", path.display()))?;
        done.cut = total - whole;
    }
    Ok(done)
}

/// The name of an input line (`name` or `name,nameserver`), as its record
/// will carry it.
pub fn name_of(line: &str) -> &str {
    let line = line.trim();
    line.split_once(',').map_or(line, |(name, _)| name.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_records_are_done_and_a_cut_line_is_removed() {
        let dir = testkit::temp_dir("resume");
        let path = dir.join("out.jsonl");
        let whole = "{\"name\":\"a.example\",\"status\":\"NOERROR\"}\n{\"name\":\"b.example\",\"status\":\"TIMEOUT\"}\n";
        let cut_short = "{\"name\":\"c.exa";
        std::fs::write(&path, format!("{whole}{cut_short}")).unwrap();
        let done = read_done(&path).unwrap();
        let mut names: Vec<&str> = done.names.iter().map(String::as_str).collect();
        names.sort();
        assert_eq!(names, ["a.example", "b.example"]);
        assert_eq!(done.cut, cut_short.len() as u64);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), whole);
        // A bad line in the middle is not ours to cut.
        std::fs::write(&path, format!("junk\n{whole}")).unwrap();
        let e = read_done(&path).unwrap_err().to_string();
        assert!(e.contains("line 1 is not a lookup record"), "{e}");
        assert!(read_done(&dir.join("none.jsonl")).unwrap().names.is_empty());
        assert_eq!(name_of(" x.example , 127.0.0.1 "), "x.example");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
