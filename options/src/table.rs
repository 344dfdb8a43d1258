//! A stage's table, taken apart key by key.

use crate::{OptionDoc, OptionError, OptionValue};

/// The keys of a stage's table not yet taken by its options struct.
#[derive(Debug, Default)]
pub struct OptionTable {
    table: toml::Table,
}

impl OptionTable {
    /// Wraps `table`.
    pub fn new(table: toml::Table) -> Self {
        OptionTable { table }
    }

    /// Takes `key` out of the table, read as a `T`; `None` when absent.
    pub fn take<T: OptionValue>(&mut self, key: &str) -> Result<Option<T>, OptionError> {
        match self.table.remove(key) {
            None => Ok(None),
            Some(value) => T::from_toml(value)
                .map(Some)
                .map_err(|message| OptionError::at(key, message)),
        }
    }

    /// Takes a key that must be given.
    pub fn take_required<T: OptionValue>(&mut self, key: &str) -> Result<T, OptionError> {
        self.take(key)?
            .ok_or_else(|| OptionError::at(key, "is required"))
    }

    /// Checks that every key is one of `docs`. The error names the first
    /// unknown key, and the closest known key when one is close (`qnme` →
    /// `qname`); `hint` may give the message for a particular key.
    pub fn check_known(
        &self,
        docs: &[OptionDoc],
        hint: fn(&str) -> Option<&'static str>,
    ) -> Result<(), OptionError> {
        let Some(unknown) = self
            .table
            .keys()
            .find(|key| !docs.iter().any(|d| d.key == key.as_str()))
        else {
            return Ok(());
        };
        if let Some(message) = hint(unknown) {
            return Err(OptionError::at(unknown, message));
        }
        let known: Vec<&str> = docs.iter().map(|d| d.key).collect();
        let message = if known.is_empty() {
            "unknown option: this module takes no options".to_string()
        } else if let Some(close) = closest(unknown, &known) {
            format!(
                "unknown option; did you mean `{close}`? (options: {})",
                known.join(", ")
            )
        } else {
            format!("unknown option (options: {})", known.join(", "))
        };
        Err(OptionError::at(unknown, message))
    }
}

/// The known key at most two edits from `key`, if one is.
fn closest<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (edit_distance(key, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k)
}

/// Levenshtein distance (keys are short ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if ca == *cb {
                diagonal
            } else {
                1 + diagonal.min(above).min(row[j])
            };
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("qnme", "qname"), 1);
        assert_eq!(edit_distance("timeout_ms", "timeout"), 3);
        assert_eq!(edit_distance("", "ab"), 2);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
