//! Pipelines made in code rather than read from a file: a command's flags
//! made into stages ([`Pipeline::from_stages`]), and any pipeline printed
//! back as a file ([`Pipeline::to_toml`], `--print-pipeline`).

use super::{Drive, Pipeline, StageSpec, Threads};
use std::collections::BTreeMap;

impl Pipeline {
    /// A pipeline made in code, as a command makes one of its flags:
    /// `(module, options)` in order, pushed from the input. `source` names
    /// it in errors (`dnsluice replay`); its stages have no lines.
    pub fn from_stages<M: Into<String>>(
        source: &str,
        stages: impl IntoIterator<Item = (M, toml::Table)>,
    ) -> Pipeline {
        Pipeline {
            file: source.to_string(),
            base_dir: None,
            drive: Drive::Push,
            metrics_listen: None,
            stages: stages
                .into_iter()
                .map(|(module, options)| StageSpec {
                    module: module.into(),
                    options,
                    line: None,
                    key_lines: BTreeMap::new(),
                    set_keys: Vec::new(),
                })
                .collect(),
            threads: Threads::Auto,
            threads_line: None,
            ordered: true,
        }
    }

    /// The pipeline as a TOML file that [`Pipeline::parse`] reads back
    /// (`--print-pipeline`): a `[[stage]]` table per stage, `module` first.
    pub fn to_toml(&self) -> String {
        let mut text = String::new();
        if self.drive == Drive::Pull {
            text.push_str("drive = \"pull\"\n");
        }
        if let Threads::Count(n) = self.threads {
            text.push_str(&format!("threads = {n}\n"));
        }
        if !self.ordered {
            text.push_str("ordered = false\n");
        }
        if let Some(addr) = self.metrics_listen {
            text.push_str(&format!("metrics_listen = \"{addr}\"\n"));
        }
        let keys = self.threads != Threads::Auto || !self.ordered || self.metrics_listen.is_some();
        if self.drive == Drive::Pull || keys {
            text.push('\n');
        }
        for stage in &self.stages {
            let mut module = toml::Table::new();
            module.insert("module".into(), stage.module.clone().into());
            text.push_str("[[stage]]\n");
            text.push_str(&toml::to_string(&module).unwrap_or_default());
            text.push_str(&toml::to_string(&stage.options).unwrap_or_default());
            text.push('\n');
        }
        text
    }
}
