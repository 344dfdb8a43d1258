//! The names a lookup run already recorded, for a scan that goes on where
//! it stopped (`input.lines`' `skip_recorded`, `dnsluice lookup --resume`).
//!
//! The records file is JSON lines, one lookup record each, whose `name` is
//! the name it answers (as `lookup.dns` writes it, in either shape). A last
//! line cut short (the run was killed while writing it) is no record: its
//! name is asked again, and `output.json`'s `append` cuts the line off
//! before it appends. A line in the middle that is not a record is an
//! error: the file is not a lookup's output. Names are told apart by their
//! text, as records carry them, and counted: a name on two lines of the
//! input with one record has one line left to ask.

use dnsluice_core::StageError;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// What an earlier run left in its records file.
#[derive(Debug, Default)]
pub struct Recorded {
    /// The names that have their record, with how many records each.
    pub names: HashMap<String, u64>,
    /// Bytes of a last line cut short (no record), 0 when the file ends
    /// with a whole line.
    pub partial_bytes: u64,
}

/// The `name` of a record, without reading the rest of it into a tree.
#[derive(serde::Deserialize)]
struct Named {
    name: String,
}

/// Reads the records in `path`; none when it does not exist. `module`
/// names the stage in errors.
pub fn read_recorded(module: &str, path: &Path) -> Result<Recorded, StageError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Recorded::default()),
        Err(e) => return Err(StageError::io(path, e)),
    };
    let total = file.metadata().map_err(|e| StageError::io(path, e))?.len();
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut recorded = Recorded::default();
    let (mut whole, mut line, mut number) = (0u64, Vec::new(), 0u64);
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| StageError::io(path, e))?;
        if n == 0 {
            break;
        }
        number += 1;
        let record = line
            .strip_suffix(b"\n")
            .and_then(|text| serde_json::from_slice::<Named>(text).ok());
        match record {
            Some(record) => {
                *recorded.names.entry(record.name).or_default() += 1;
                whole += n as u64;
            }
            // The last line, cut short when the run was killed.
            None if whole + n as u64 == total => break,
            None => {
                return Err(StageError::config(
                    module,
                    format!(
                        "{} line {number} is not a lookup record: is it a lookup's output?",
                        path.display()
                    ),
                ))
            }
        }
    }
    recorded.partial_bytes = total - whole;
    Ok(recorded)
}

/// The name of an input line (`name` or `name,nameserver`), as its record
/// carries it.
pub fn name_of(line: &str) -> &str {
    let line = line.trim();
    line.split_once(',').map_or(line, |(name, _)| name.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_records_are_recorded_and_a_cut_line_is_not() {
        let dir = testkit::temp_dir("recorded");
        let path = dir.join("out.jsonl");
        let whole = "{\"name\":\"a.example\",\"status\":\"NOERROR\"}\n{\"name\":\"b.example\",\"status\":\"TIMEOUT\"}\n";
        let cut_short = "{\"name\":\"c.exa";
        std::fs::write(&path, format!("{whole}{cut_short}")).unwrap();
        let recorded = read_recorded("input.lines", &path).unwrap();
        let mut names: Vec<(&str, u64)> = recorded
            .names
            .iter()
            .map(|(name, n)| (name.as_str(), *n))
            .collect();
        names.sort();
        assert_eq!(names, [("a.example", 1), ("b.example", 1)]);
        assert_eq!(recorded.partial_bytes, cut_short.len() as u64);
        // A bad line in the middle is not a lookup's output.
        std::fs::write(&path, format!("junk\n{whole}")).unwrap();
        let e = read_recorded("input.lines", &path).unwrap_err().to_string();
        assert!(e.contains("line 1 is not a lookup record"), "{e}");
        let none = read_recorded("input.lines", &dir.join("none.jsonl")).unwrap();
        assert!(none.names.is_empty());
        assert_eq!(name_of(" x.example , 127.0.0.1 "), "x.example");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
