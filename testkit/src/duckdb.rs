//! DuckDB (Python's `duckdb`, installed by .ci/run) as the independent
//! reader of `output.parquet`: a query's rows as JSON objects.

use serde_json::Value;
use std::process::Command;

/// The Python program: runs each query of its arguments, prints the rows
/// of each as a JSON array of arrays of objects (values DuckDB cannot put
/// in JSON as text). One process for many queries: importing duckdb is
/// most of a query's time.
const PROGRAM: &str = r#"
import duckdb, json, sys
out = []
for sql in sys.argv[1:]:
    result = duckdb.sql(sql)
    out.append([dict(zip(result.columns, row)) for row in result.fetchall()])
print(json.dumps(out, default=str))
"#;

/// The rows of `sql` as DuckDB reads them; panics with DuckDB's error when
/// the query fails (a file it cannot open, a torn footer).
pub fn query(sql: &str) -> Vec<Value> {
    queries(&[sql]).remove(0)
}

/// The rows of each query, in one DuckDB process.
pub fn queries<S: AsRef<str>>(sql: &[S]) -> Vec<Vec<Value>> {
    match try_queries(sql) {
        Ok(rows) => rows,
        Err(e) => panic!("DuckDB: {e}"),
    }
}

/// [`queries`] that gives DuckDB's error back.
pub fn try_queries<S: AsRef<str>>(sql: &[S]) -> Result<Vec<Vec<Value>>, String> {
    let out = Command::new("python3")
        .args(["-c", PROGRAM])
        .args(sql.iter().map(AsRef::as_ref))
        .output()
        .expect("python3 runs");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}
